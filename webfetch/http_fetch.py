"""The main document fetched in our own process with Chrome's TLS and HTTP/2 fingerprint (curl_cffi)."""

# The browser curl_cffi impersonates; tests/test_fingerprint.py holds it to the Chromium the daemon runs.
IMPERSONATE = "chrome152"
