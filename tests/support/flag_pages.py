"""The flags test set: interstitial pages written from what they really look like (their titles, words and
markup, trimmed), and ordinary pages that must get no flag, including the near misses (a consent banner
beside an article, a sign-in box in a header, a captcha under a comment form, an article about 404 errors).
Used by tests/test_flags.py (the detection functions on every page, the daemon on a representative set)
and by bin/bench (precision and recall)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .site import ARTICLE_TEXT


@dataclass(frozen=True)
class Case:
    name: str
    flag: str | None      # the flag the page must get; None: an ordinary page, no flag at all
    html: str
    status: int = 200
    path: str = ""        # where the local site serves it (default /flags/<name>)
    final_path: str = ""  # the page the fetch ends on, when the path redirects there (same host)
    rendered: str = ""    # the DOM after Chrome ran the page's scripts, when they change it

    @property
    def dom(self) -> str:
        return self.rendered or self.html

    @property
    def url_path(self) -> str:
        return self.path or f"/flags/{self.name}"


LONG_TEXT = " ".join(ARTICLE_TEXT * 6)
PARAS = "".join(f"<p>{p}</p>" for p in ARTICLE_TEXT * 4)


def article(title: str, extra_head: str = "", before: str = "", after: str = "", body: str = PARAS) -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>{extra_head}</head>'
            f'<body>{before}<main><article><h1>{title}</h1>{body}</article></main>{after}</body></html>')


CLOUDFLARE_JS = """<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8"><meta http-equiv="X-UA-Compatible" content="IE=Edge">
<meta name="robots" content="noindex,nofollow"><meta name="viewport" content="width=device-width,initial-scale=1">
<style>*{box-sizing:border-box;margin:0;padding:0}html{line-height:1.15}body{display:flex;flex-direction:column}</style>
<meta http-equiv="refresh" content="390"></head><body class="no-js"><div class="main-wrapper" role="main">
<div class="main-content"><noscript><div id="challenge-error-title"><div class="h2"><span class="icon-wrapper">
<div class="heading-icon warning-icon"></div></span><span id="challenge-error-text">Enable JavaScript and cookies to
continue</span></div></div></noscript></div></div><script>(function(){window._cf_chl_opt={cvId: '3',cZone:
"www.example.com",cType: 'managed',cRay: '8a1b2c3d4e5f6789',cH: 'dGhpcyBpcyBub3QgYSByZWFs',cUPMDTk:
"/?__cf_chl_tk=abc",cFPWv: 'b',cITimeS: '1717171717'};var cpo = document.createElement('script');
cpo.src = '/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1?ray=8a1b2c3d4e5f6789';
window._cf_chl_opt.cOgUHash = location.hash === '' ? '' : location.hash;
document.getElementsByTagName('head')[0].appendChild(cpo);}());</script></body></html>"""

CLOUDFLARE_CHECKING = """<!DOCTYPE HTML><html lang="en-US"><head><meta charset="UTF-8" />
<meta http-equiv="X-UA-Compatible" content="IE=Edge,chrome=1" /><meta name="robots" content="noindex, nofollow" />
<title>Just a moment...</title></head><body><table width="100%" height="100%" cellpadding="20"><tr>
<td align="center" valign="middle"><div class="cf-browser-verification cf-im-under-attack"><noscript>
<h1 data-translate="turn_on_js" style="color:#bd2426;">Please turn JavaScript on and reload the page.</h1></noscript>
<div id="cf-content" style="display:none"><div><div id="cf-bubbles"><div class="bubbles"></div></div></div>
<h1><span data-translate="checking_browser">Checking your browser before accessing</span> example.com.</h1>
<p data-translate="process_is_automatic">This process is automatic. Your browser will redirect to your requested
content shortly.</p><p data-translate="allow_5_secs">Please allow up to 5 seconds&hellip;</p></div>
<form id="challenge-form" action="/?__cf_chl_jschl_tk__=abc" method="POST" enctype="application/x-www-form-urlencoded">
<input type="hidden" name="r" value="abc"/><input type="hidden" name="jschl_vc" value="1"/></form></div>
<div class="attribution">DDoS protection by <a rel="noopener noreferrer" href="/5xx-error-landing/">Cloudflare</a>
<br/>Ray ID: 4e5f6a7b8c9d0e1f</div></td></tr></table></body></html>"""

CLOUDFLARE_VERIFY = """<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title><meta charset="UTF-8">
</head><body><div class="main-wrapper" role="main"><div class="main-content"><h1 class="zone-name-title h1">www.example.org</h1>
<h2 class="h2" id="challenge-running">Verifying you are human. This may take a few seconds.</h2>
<div id="challenge-stage"></div><div id="challenge-body-text" class="core-msg spacer">www.example.org needs to
review the security of your connection before proceeding.</div></div></div><div class="footer" role="contentinfo">
<div class="footer-inner"><div class="clearfix diagnostic-wrapper"><div class="ray-id">Ray ID: <code>8a1b2c3d4e5f</code>
</div></div><div class="text-center" id="footer-text">Performance &amp; security by Cloudflare</div></div></div>
<script>(function(){window._cf_chl_opt={cvId:'3',cZone:"www.example.org",cType:'managed'};}());</script></body></html>"""

CLOUDFLARE_BLOCKED = """<!DOCTYPE html><html class="no-js" lang="en-US"><head>
<title>Attention Required! | Cloudflare</title><meta charset="UTF-8" /></head><body><div id="cf-wrapper">
<div id="cf-error-details" class="cf-error-details-wrapper"><div class="cf-wrapper cf-header cf-error-overview">
<h1 data-translate="block_headline">Sorry, you have been blocked</h1><h2 class="cf-subheadline">
<span data-translate="unable_to_access">You are unable to access</span> example.net</h2></div>
<div class="cf-section cf-wrapper"><div class="cf-columns two"><div class="cf-column">
<h2 data-translate="blocked_why_headline">Why have I been blocked?</h2><p data-translate="blocked_why_detail">This
website is using a security service to protect itself from online attacks. The action you just performed triggered
the security solution.</p></div><div class="cf-column"><h2 data-translate="blocked_resolve_headline">What can I do to
resolve this?</h2><p>You can email the site owner to let them know you were blocked.</p></div></div></div>
<div class="cf-error-footer"><p>Cloudflare Ray ID: <strong>8a1b2c3d4e5f6a7b</strong></p></div></div></div></body></html>"""

DATADOME = """<html><head><title>example.com</title><style>#cmsg{animation: A 1.5s;}@keyframes A{0%{opacity:0;}
99%{opacity:0;}100%{opacity:1;}}</style></head><body style="margin:0"><p id="cmsg">Please enable JS and disable any
ad blocker</p><script data-cfasync="false">var dd={'rt':'c','cid':'AHrlqAAAAAMA','hsh':'A55FBF4311ED6F1BF9911EB71931D5',
't':'fe','s':17434,'e':'5ab2','host':'geo.captcha-delivery.com'}</script>
<script data-cfasync="false" src="https://ct.captcha-delivery.com/c.js"></script></body></html>"""

DATADOME_CAPTCHA = """<!DOCTYPE html><html lang="en"><head><title>Captcha | example.com</title><meta charset="utf-8">
</head><body><div class="captcha__human"><div class="captcha__human__title">We want to make sure it is actually you we
are dealing with and not a robot.</div><div class="captcha__human__subtitle">Please complete the security check
to access example.com</div></div><iframe src="https://geo.captcha-delivery.com/captcha/?initialCid=AHrlq" width="100%"
height="500" title="DataDome CAPTCHA"></iframe><div class="captcha__footer">Why this verification? Our systems have
detected unusual activity coming from your device.</div></body></html>"""

PERIMETERX = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Access to this page has been denied
</title><meta name="robots" content="noindex, nofollow"></head><body><section class="px-captcha-error-container">
<div class="px-captcha-error-header"><div class="px-captcha-error-message">Press &amp; Hold to confirm you are<br>a
human (and not a bot).</div></div><div class="px-captcha-error-wrapper"><div id="px-captcha"></div></div>
<div class="px-captcha-error-refid">Reference ID 5a1b2c3d-2036-11f1-8173-a766063edaa9</div></section>
<script>window._pxAppId = 'PXabc123';window._pxJsClientSrc = '/abc123/init.js';window._pxHostUrl = '/abc123/xhr';
window._pxreCaptchaTheme = 'light';</script><script src="/abc123/captcha/captcha.js?a=c&m=0"></script></body></html>"""

HUMAN_ARE_YOU = """<!DOCTYPE html><html><head><title>Robot or human?</title><meta charset="utf-8"></head><body>
<main><h1>Activate and hold the button to confirm that you're human. Thank You!</h1><div id="px-captcha"></div>
<p>Let us know you're human (no robots allowed)</p><p>If you're not a robot, please try again.</p></main>
<script src="/px/PXu6b0qd2S/init.js"></script></body></html>"""

HCAPTCHA_WALL = """<!doctype html><html><head><title>One more step</title>
<script src="https://js.hcaptcha.com/1/api.js" async defer></script></head><body><div class="container">
<h1>One more step</h1><p>Please complete the security check to access this site.</p>
<form method="post" action="/verify"><div class="h-captcha" data-sitekey="10000000-ffff-ffff-ffff-000000000001"></div>
<button type="submit">Continue</button></form></div></body></html>"""

RECAPTCHA_WALL = """<html><head><title>Security Check</title>
<script src="https://www.google.com/recaptcha/api.js" async defer></script></head><body><div id="wrap">
<h2>Please verify you are a human</h2><p>Our systems have detected unusual traffic from your computer network.</p>
<form action="/captcha/submit" method="POST"><div class="g-recaptcha" data-sitekey="6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
data-callback="onSubmit"></div><input type="hidden" name="continue" value="/news/story"></form></div></body></html>"""

TURNSTILE_WALL = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>example.org</title>
<script src="https://challenges.cloudflare.com/turnstile/v0/api.js" async defer></script></head><body>
<div style="margin:20vh auto;max-width:400px;text-align:center"><form action="/__verify" method="POST">
<div class="cf-turnstile" data-sitekey="1x00000000000000000000AA" data-callback="done"></div></form></div></body></html>"""

GOOGLE_SORRY = """<html><head><meta http-equiv="content-type" content="text/html; charset=utf-8"><title>https://www.example.com/search?q=otters</title></head>
<body style="font-family: arial, sans-serif; background-color: #fff; color: #000; padding:20px; font-size:18px;">
<div style="max-width:400px;"><hr noshade size="1" style="color:#ccc; background-color:#ccc;"><br>
<form id="captcha-form" action="index" method="post"><script src="https://www.google.com/recaptcha/api.js" async defer></script>
<div id="recaptcha" class="g-recaptcha" data-sitekey="6LfwuyUTAAAAAOAmoS0fdqijC2PbbdH4kjq62Y1b"></div>
<input type='hidden' name='q' value='EgQAAAAA'><input type="hidden" name="continue" value="https://www.example.com/"></form>
<hr noshade size="1" style="color:#ccc; background-color:#ccc;"><div style="font-size:13px;"><b>About this page</b>
<br><br>Our systems have detected unusual traffic from your computer network. This page checks to see if it&#39;s
really you sending the requests, and not a robot.</div></div></body></html>"""

AKAMAI_DENIED = """<HTML><HEAD>
<TITLE>Access Denied</TITLE>
</HEAD><BODY>
<H1>Access Denied</H1>

You don't have permission to access "http&#58;&#47;&#47;www&#46;example&#46;com&#47;product&#47;123" on this server.<P>
Reference&#32;&#35;18&#46;5a1b2c3d&#46;1717171717&#46;2a3b4c5d
<P>https&#58;&#47;&#47;errors&#46;edgesuite&#46;net&#47;18&#46;5a1b2c3d&#46;1717171717&#46;2a3b4c5d</P>
</BODY>
</HTML>"""

INCAPSULA = """<html style="height:100%"><head><META NAME="ROBOTS" CONTENT="NOINDEX, NOFOLLOW">
<meta name="format-detection" content="telephone=no"><meta name="viewport" content="initial-scale=1.0">
<meta http-equiv="X-UA-Compatible" content="IE=edge,chrome=1"></head><body style="margin:0px;height:100%">
<iframe id="main-iframe" src="/_Incapsula_Resource?SWUDNSAI=31&xinfo=5-1234-0%200NNN%20RT&incident_id=123-456&edet=15"
frameborder=0 width="100%" height="100%" marginheight="0px" marginwidth="0px">Request unsuccessful. Incapsula incident
ID: 123000450123456789-12345678901234567</iframe></body></html>"""

F5_REJECTED = """<html><head><title>Request Rejected</title></head><body>The requested URL was rejected. Please consult
with your administrator.<br><br>Your support ID is: 1234567890123456789<br><br><a href='javascript:history.back();'>
[Go Back]</a></body></html>"""

AWS_WAF = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title></title><style>body{font-family:"Arial"}</style><script type="text/javascript">window.awsWafCookieDomainList = [];
window.gokuProps = {"key":"AQIDAHjcYu/GjX+QlghicBgQ/7bFaQZ+m5FKCMDnO+vTbNg96AH","iv":"D5498QEEzgAAAVIr","context":"Dz2f"};
</script><script src="/challenge.js"></script></head><body><div id="challenge-container"></div>
<noscript><h1>JavaScript is disabled</h1>In order to continue, we need to verify that you're not a robot. This requires
JavaScript. Enable JavaScript and then reload the page.</noscript></body></html>"""

AMAZON_ROBOT = """<!doctype html><html class="a-no-js" data-19ax5a9jf="dingo"><head><meta charset="utf-8">
<title dir="ltr">Amazon.com</title></head><body><div class="a-container a-padding-double-large" style="min-width:350px;padding:44px 0 !important">
<div class="a-row a-spacing-double-large" style="width: 350px; margin: 0 auto"><div class="a-row a-spacing-medium a-text-center">
<i class="a-icon a-logo"></i></div><div class="a-box a-alert a-alert-info a-spacing-base"><div class="a-box-inner">
<h4>Enter the characters you see below</h4><p class="a-last">Sorry, we just need to make sure you're not a robot. For best
results, please make sure your browser is accepting cookies.</p></div></div><form method="get" action="/errors/validateCaptcha"
name=""><div class="a-row a-spacing-large"><h4>Type the characters you see in this image:</h4>
<img src="/captcha/abc/Captcha_xyz.jpg"><input autocomplete="off" spellcheck="false" placeholder="Type characters"
id="captchacharacters" name="field-keywords" class="a-span12" autocapitalize="off" autocorrect="off" type="text">
<button type="submit" class="a-button-text">Continue shopping</button></div></form></div></div></body></html>"""

JS_SHELL_REACT = """<!doctype html><html lang="en"><head><meta charset="utf-8"/><link rel="icon" href="/favicon.ico"/>
<meta name="viewport" content="width=device-width,initial-scale=1"/><meta name="theme-color" content="#000000"/>
<title>Dashboard</title><script defer="defer" src="/static/js/main.8a1b2c3d.js"></script>
<link href="/static/css/main.4e5f6a7b.css" rel="stylesheet"></head><body><noscript>You need to enable JavaScript to run
this app.</noscript><div id="root"></div></body></html>"""

JS_SHELL_NEXT = """<!DOCTYPE html><html><head><meta charSet="utf-8"/><title>Acme</title>
<script src="/_next/static/chunks/webpack-8a1b.js" defer=""></script>
<script src="/_next/static/chunks/main-4e5f.js" defer=""></script></head><body><div id="__next"></div>
<script id="__NEXT_DATA__" type="application/json">{"props":{"pageProps":{}},"page":"/app","query":{},"buildId":"abc",
"runtimeConfig":{},"isFallback":false,"gssp":true,"appGip":true,"scriptLoader":[]}</script>
<script>window.__APP_CONFIG__ = {"api": "/graphql", "features": ["a", "b", "c"], "locale": "en-US", "version": "5.2.1",
"tracking": {"enabled": true, "sampleRate": 0.25}, "routes": ["/", "/app", "/settings", "/billing", "/team"]};</script>
</body></html>"""

JS_SHELL_ANGULAR = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Portal</title>
<base href="/"><meta name="viewport" content="width=device-width, initial-scale=1"></head><body>
<app-root></app-root><noscript>Please enable JavaScript to continue using this application.</noscript>
<script src="runtime.js" type="module"></script><script src="polyfills.js" type="module"></script>
<script src="main.js" type="module"></script></body></html>"""

LOGIN_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Sign in · Example</title></head>
<body class="logged-out"><div class="auth-form px-3" id="login"><form action="/session" method="post">
<div class="auth-form-header p-0"><h1>Sign in to Example</h1></div><div class="auth-form-body mt-3">
<label for="login_field">Username or email address</label><input type="text" name="login" id="login_field"
autocapitalize="off" autocorrect="off" autocomplete="username" autofocus="autofocus">
<div class="position-relative"><label for="password">Password</label><input type="password" name="password"
id="password" autocomplete="current-password"><a class="label-link" href="/password_reset">Forgot password?</a>
<input type="submit" name="commit" value="Sign in" class="btn btn-primary btn-block"></div></div></form>
<p class="login-callout mt-3">New to Example? <a href="/signup">Create an account</a>.</p></div></body></html>"""

LOGIN_REQUIRED = """<!DOCTYPE html><html><head><title>Members area - Community Forum</title></head><body>
<header><a href="/">Community Forum</a></header><main><div class="notice"><h2>Log in to continue</h2>
<p>You must be logged in to view this topic. Please log in or register for a free account.</p>
<a class="button" href="/login">Log in</a> <a class="button" href="/register">Register</a></div></main>
<footer>Powered by forum software</footer></body></html>"""

LOGIN_SSO = """<!DOCTYPE html><html><head><title>Log in</title></head><body><div class="card"><h1>Log in</h1>
<p>Continue with your work account.</p><a class="btn" href="/oauth/google">Continue with Google</a>
<a class="btn" href="/oauth/microsoft">Continue with Microsoft</a><form method="post" action="/login">
<input type="email" name="email" placeholder="you@company.com"><input type="password" name="password">
<button>Log in</button></form></div></body></html>"""

CONSENT_WALL = """<!DOCTYPE html><html lang="en"><head><title>Before you continue</title></head><body>
<div class="qc-cmp2-container" id="qc-cmp2-container"><div class="qc-cmp2-summary-section"><h2>We value your privacy</h2>
<p>We and our partners store and/or access information on a device, such as cookies and process personal data, such
as unique identifiers and standard information sent by a device for personalised ads and content, ad and content
measurement, and audience insights, as well as to develop and improve products.</p><p>With your permission we and our
partners may use precise geolocation data and identification through device scanning. You may click to consent to our
and our partners' processing as described above. Alternatively you may access more detailed information and change
your preferences before consenting or to refuse consenting.</p></div><div class="qc-cmp2-summary-buttons">
<button mode="secondary">MORE OPTIONS</button><button mode="primary">AGREE</button></div></div></body></html>"""

CONSENT_WALL_DE = """<!DOCTYPE html><html lang="de"><head><title>Zustimmung</title></head><body><div id="sp_message_container_123">
<div class="message"><h2>Wir brauchen Ihre Zustimmung</h2><p>Wir und unsere Partner verwenden Cookies und andere
Technologien. Mit Klick auf "Alle akzeptieren" stimmen Sie der Verwendung zu. Unter "Einstellungen" können Sie Ihre
Auswahl anpassen; Sie können Ihre Einwilligung (consent) jederzeit widerrufen.</p><button>Alle akzeptieren</button>
<button>Einstellungen</button></div></div><div id="content" style="display:none">Artikel folgt.</div></body></html>"""

PAYWALL_LDJSON = article("Markets slide as rates climb", extra_head="""<script type="application/ld+json">{"@context":
"https://schema.org","@type":"NewsArticle","headline":"Markets slide as rates climb","isAccessibleForFree":false,
"hasPart":{"@type":"WebPageElement","isAccessibleForFree":false,"cssSelector":".paywall"}}</script>""",
    body=f"<p>{ARTICLE_TEXT[0]}</p><p>{ARTICLE_TEXT[1]}</p><div class='paywall'></div>")

PAYWALL_PROMPT = article("The quiet revival of the valley", body=f"""<p>{ARTICLE_TEXT[0]}</p><p>{ARTICLE_TEXT[1]}</p>
<div class="subscription-wall"><h3>Subscribe to continue reading</h3><p>You have reached your limit of free articles.
Subscribe for unlimited access to our journalism.</p><a href="/subscribe">Subscribe now</a>
<p>Already a subscriber? <a href="/login">Sign in</a></p></div>""")

SOFT_404 = article("Page not found | Valley Gazette", body="""<p>Sorry, the page you were looking for could not be
found. It may have been moved or deleted.</p><p><a href="/">Go to the home page</a> or use the search box above.</p>""")

SOFT_404_SPA = """<!doctype html><html><head><title>404 - Example Docs</title></head><body><div id="app"><nav>
<a href="/">Docs</a></nav><main><h1>404</h1><p>This page doesn't exist. Check the URL or go back to the docs home.</p>
</main></div><script>window.__DOCS__ = true;</script></body></html>"""

# Written after the detection was tuned on the pages above, to see how it generalizes (recorded in the
# report before any change for them).
PARDON_INTERRUPTION = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Pardon Our Interruption</title>
<meta name="viewport" content="width=device-width"><link rel="stylesheet" href="/_Incapsula_Resource?CWUDNSAI=24&xinfo=1"></head>
<body><div class="container"><h1>Pardon Our Interruption</h1><p>As you were browsing something about your browser made us think
you were a bot. There are a few reasons this might happen:</p><ul><li>You're a power user moving through this website with
super-human speed.</li><li>You've disabled cookies in your web browser.</li><li>A third-party browser plugin, such as Ghostery
or NoScript, is preventing JavaScript from running.</li></ul><p>To regain access, please make sure that cookies and JavaScript
are enabled before reloading the page.</p></div></body></html>"""

KASADA = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><script>window.KPSDK={};KPSDK.now=typeof
performance!=='undefined'&&performance.now?performance.now.bind(performance):Date.now.bind(Date);KPSDK.start=KPSDK.now();
</script><script src="/149e9513-01fa-4fb0-aad4-566afd725d1b/2d206a39-8ed7-437e-a3be-862e0f06eea3/ips.js?tkrm_alpekz_s1.3=abc">
</script></body></html>"""

VERCEL_CHECKPOINT = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Vercel Security Checkpoint</title>
</head><body><main><div class="card"><h1>We're verifying your browser</h1><p class="sub">Vercel Security Checkpoint</p>
<noscript><p>Please enable JavaScript to continue.</p></noscript><div id="spinner"></div><p class="footer">Website owner?
Click here to fix</p></div></main><script src="/.well-known/vercel/security/static/challenge.v2.min.js"></script></body></html>"""

SUCURI = """<!DOCTYPE html><html><head><title>Sucuri WebSite Firewall - Access Denied</title></head><body><div id="main-container">
<h2 style="color:#c00">Access Denied - Sucuri Website Firewall</h2><table><tr><td>Your IP:</td><td>203.0.113.7</td></tr>
<tr><td>URL:</td><td>www.example.com/</td></tr><tr><td>Block ID:</td><td>BNP005</td></tr><tr><td>Block reason:</td><td>Bad bot
access attempt.</td></tr></table><p>If you are the site owner (or you manage this site), please whitelist your IP or if you
think this block is an error please open a support ticket.</p></div></body></html>"""

AUTHWALL = """<!DOCTYPE html><html lang="en"><head><title>Sign Up | LinkedIn</title></head><body><main class="authwall">
<h1 class="authwall-join-form__title">Join LinkedIn</h1><form class="join-form" action="/signup" method="post"><label>Email
or phone number</label><input type="text" name="email-or-phone"><label>Password (6+ characters)</label><input
type="password" name="password"><button type="submit">Agree &amp; Join</button></form><p>Already on LinkedIn?
<a href="/login">Sign in</a></p></main></body></html>"""

MEMBER_ONLY = article("Ten lessons from a decade of river surveys", body=f"""<p>{ARTICLE_TEXT[0]}</p>
<div class="meteredContent"><h2>Member-only story</h2><p>Become a member to read this story, and all of the stories on the
site.</p><a href="/plans">Upgrade</a></div>""")

SUBSTACK_PAID = article("The valley letter, part 12", body=f"""<p>{ARTICLE_TEXT[1]}</p><div class="paywall">
<h2>This post is for paid subscribers</h2><a href="/subscribe">Subscribe</a><p>Already a paid subscriber?
<a href="/sign-in">Sign in</a></p></div>""")

SOFT_404_DE = article("Seite nicht gefunden - Talbote", body="""<p>Die angeforderte Seite wurde leider nicht gefunden.
Vielleicht hilft Ihnen die Suche weiter.</p>""")

VUE_LOADING = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Acme Console</title>
<script type="module" crossorigin src="/assets/index-8a1b2c3d.js"></script></head><body><div id="app"><div
class="loader">Loading…</div></div></body></html>"""


# --- beyond English (issue 26): walls that say nothing the English phrases know, judged by their structure

# A German "pay or OK" wall (read with ads and tracking, or take the ad-free subscription): a full-viewport
# dialog over an app that shows nothing until the reader chooses. Its words are none of the English ones.
PAY_OR_OK_DE = """<!DOCTYPE html><html lang="de"><head><meta charset="utf-8"><title>Rundschau</title>
<script src="/static/app.4e5f.js" defer></script></head><body><div id="page-root" class="app-shell"></div>
<div id="cmp-layer" class="cmp-layer" style="position: fixed; inset: 0; z-index: 2147483647; background: rgba(0,0,0,.7)">
<div class="cmp-box" role="dialog" aria-modal="true" aria-labelledby="cmp-title"><h2 id="cmp-title">Lesen Sie mit Werbung
oder werbefrei im Pur-Abo</h2><p>Nutzen Sie die Rundschau wie gewohnt mit Werbung und Tracking: Wir und unsere Partner
speichern Informationen auf Ihrem Gerät und verarbeiten personenbezogene Daten, um Ihnen Anzeigen und Inhalte zu zeigen
und deren Wirkung zu messen. Ihre Einwilligung können Sie jederzeit in den Datenschutzeinstellungen widerrufen.</p>
<p>Oder lesen Sie werbefrei und ohne Tracking für 4,99 Euro im Monat.</p><button class="cmp-accept">Zustimmen und
weiterlesen</button><button class="cmp-pur">Pur-Abo abschließen</button><a href="/datenschutz">Datenschutzerklärung</a>
<a href="/impressum">Impressum</a></div></div></body></html>"""

# A French consent overlay hiding a page whose content waits behind it (display: none until the choice).
CONSENT_OVERLAY_FR = """<!DOCTYPE html><html lang="fr"><head><meta charset="utf-8"><title>Le Courrier de la vallée</title>
</head><body><div id="contenu" style="display:none"></div><div class="didomi-popup" role="dialog" aria-modal="true">
<div class="didomi-popup-container"><h1>Vos choix en matière de vie privée</h1><p>Nous et nos partenaires utilisons des
traceurs pour stocker et accéder à des informations sur votre terminal, mesurer l'audience et vous proposer des publicités
personnalisées. Vous pouvez changer d'avis à tout moment depuis la page Confidentialité.</p><button>Accepter et fermer
</button><button>Continuer sans accepter</button><button>Personnaliser mes choix</button></div></div></body></html>"""

# A Spanish one drawn by a script as a fixed full-screen layer (no dialog role), over an empty app root.
CONSENT_OVERLAY_ES = """<!DOCTYPE html><html lang="es"><head><meta charset="utf-8"><title>Diario del Valle</title>
<script src="/js/bundle.91ab.js" defer></script></head><body><div id="app"></div><div class="cmp-fullscreen"
style="position:fixed;top:0;left:0;width:100%;height:100%;z-index:99999;background:#fff"><div class="cmp-inner">
<h2>Tu privacidad es importante para nosotros</h2><p>Utilizamos cookies propias y de terceros para analizar el uso del
sitio y mostrarte publicidad relacionada con tus preferencias. Puedes aceptarlas, rechazarlas o configurarlas.</p>
<button>Aceptar</button><button>Rechazar</button><button>Configurar</button></div></div></body></html>"""

# A German article cut by its subscription wall, saying so only in German.
PAYWALL_DE = """<!DOCTYPE html><html lang="de"><head><meta charset="utf-8"><title>Der Fischotter kehrt zurück</title></head>
<body><main><article><h1>Der Fischotter kehrt zurück</h1><p>Im Frühjahr 2019 kehrte der Fischotter nach vierzig Jahren
in das Tal zurück. Biologen zählten elf Familien am Unterlauf, die meisten in der Nähe des alten Mühlgrabens.</p>
<div class="paywall-box"><h3>Weiterlesen mit Rundschau Plus</h3><p>Dieser Artikel ist nur für Abonnenten. Jetzt
abonnieren und weiterlesen: alle Artikel, die digitale Zeitung und der Newsletter.</p><a href="/abo">Jetzt
abonnieren</a><p>Bereits Abonnent? <a href="/login">Anmelden</a></p></div></article></main></body></html>"""

# --- ordinary pages that must get no flag -------------------------------------------------------

ONETRUST_BANNER = article("Otters return to the valley", after="""<div id="onetrust-consent-sdk"><div id="onetrust-banner-sdk"
class="otFlat"><div id="onetrust-policy"><p id="onetrust-policy-text">We use cookies to improve your experience. By
clicking "Accept All Cookies", you agree to the storing of cookies on your device to enhance site navigation,
analyze site usage, and assist in our marketing efforts. We and our partners process data for personalised ads.</p>
</div><button id="onetrust-accept-btn-handler">Accept All Cookies</button><button id="onetrust-reject-all-handler">
Reject All</button><button id="onetrust-pc-btn-handler">Cookie Settings</button></div></div>""")

HEADER_LOGIN = article("River restoration, ten years on", before="""<header><nav><a href="/">Home</a>
<a href="/login">Sign in</a></nav><div class="modal" hidden><h2>Sign in</h2><form action="/login" method="post">
<input type="email" name="email"><input type="password" name="password"><button>Log in</button></form></div></header>""")

COMMENT_RECAPTCHA = article("How the mill race was rebuilt", extra_head=
    '<script src="https://www.google.com/recaptcha/api.js" async defer></script>', after="""<section id="comments">
<h2>Leave a comment</h2><form action="/comment" method="post"><input type="text" name="name"><input type="email"
name="email"><textarea name="comment"></textarea><div class="g-recaptcha" data-sitekey="6LeIxAcTAAAAAJcZVRqyHh71"></div>
<button>Post comment</button></form></section>""")

# A short post under a comment widget that asks for JavaScript to show its comments: the ask is the widget's.
SHORT_POST_DISQUS = article("A heron at the mill", body="<p>" + ARTICLE_TEXT[0] + "</p>", after=(
    '<div id="disqus_thread"></div><noscript>Please enable JavaScript to view the <a href="https://disqus.com/'
    '?ref_noscript">comments powered by Disqus.</a></noscript><script src="/embed.js" async></script>'))

CONTACT_FORM = """<!DOCTYPE html><html><head><title>Contact us - Valley Gazette</title>
<script src="https://www.google.com/recaptcha/api.js" async defer></script></head><body><main><h1>Contact us</h1>
<p>Questions about a story, a correction or a subscription? Write to the newsroom and we answer within two working days.
For urgent news tips call the desk on 0123 456 789.</p><form action="/contact" method="post"><label>Name <input
type="text" name="name"></label><label>Email <input type="email" name="email"></label><label>Message <textarea
name="message"></textarea></label><div class="g-recaptcha" data-sitekey="6LeIxAcTAAAAAJcZVRqyHh71"></div>
<button>Send</button></form></main></body></html>"""

ARTICLE_404_TOPIC = article("How to fix 404 Not Found errors on your site",
                            body=PARAS + "<p>A 404 Not Found status tells the browser the page does not exist.</p>")

SUBSCRIBER_FOOTER = article("Otter families counted along the river", extra_head="""<script type="application/ld+json">
{"@context":"https://schema.org","@type":"NewsArticle","isAccessibleForFree":true}</script>""", before="""<header>
<a href="/subscribe">Subscribe</a> <span>Already a subscriber? <a href="/login">Sign in</a></span></header>""")

SHORT_STATIC = """<!doctype html><html><head><title>Example Domain</title><meta charset="utf-8"></head><body><div>
<h1>Example Domain</h1><p>This domain is for use in illustrative examples in documents. You may use this domain in
literature without prior coordination or asking for permission.</p><p><a href="https://www.iana.org/domains/example">
More information...</a></p></div></body></html>"""

SHORT_WITH_ANALYTICS = """<!doctype html><html><head><title>Opening hours</title><script async
src="/gtag/js?id=G-XXXX"></script><script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}
gtag('js',new Date());gtag('config','G-XXXX');</script></head><body><h1>Opening hours</h1><p>The library is open Monday to
Friday from nine to six, and on Saturdays from ten to four. It is closed on public holidays.</p></body></html>"""

COOKIE_POLICY = article("Cookie policy", body="""<p>This policy explains how the Valley Gazette uses cookies and
similar technologies on its web site, what they are for, and how you can control them in your browser settings.</p>
<p>Strictly necessary cookies keep you signed in and remember your settings. Analytics cookies count visits so we
know which stories are read. You can delete cookies at any time from your browser.</p>""" + PARAS)

DOCS_PAGE = """<!DOCTYPE html><html><head><title>Authentication - API reference</title></head><body><nav><a href="/docs">Docs</a>
</nav><main role="main"><h1>Authentication</h1><p>Every request to the API carries a token in the Authorization header.
Create a token on the settings page after you sign in, and keep it secret: anyone holding it can act as you.</p>
<pre><code>curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/me</code></pre><h2>Login flow</h2><p>Browser
applications use the OAuth device flow: the user signs in on a second screen and the application polls for the
token. Tokens expire after one hour; refresh them with the refresh token.</p>""" + PARAS + "</main></body></html>"

SEARCH_EMPTY = article("Search results for otters", body="""<p>No results found for "otterz". Check the spelling or
try a broader search.</p><form action="/search"><input type="search" name="q" value="otterz"><button>Search</button></form>
<h2>Popular stories</h2><ul><li><a href="/a">Otters return to the valley</a></li><li><a href="/b">The mill race</a></li>
</ul>""")

SHORT_THREAD_SIDEBAR_LOGIN = """<!DOCTYPE html><html><head><title>Best bait for river trout? - Anglers Forum</title></head>
<body><aside class="sidebar"><h2>Log in</h2><form action="/login" method="post"><input type="text" name="user">
<input type="password" name="pass"><button>Log in</button></form></aside><main><h1>Best bait for river trout?</h1>
<div class="post"><p>Fishing the lower reaches near the old mill this weekend. What do people use for brown trout when
the water is high and coloured after rain? I have had no luck with spinners.</p></div><div class="post"><p>Worms,
every time, fished on the bottom near the slack water by the banks. Trout come close in when the current is strong,
so do not cast too far out.</p></div><div class="post"><p>Agree with worms. A small nymph under an indicator works too
if you prefer the fly rod and can get a drift along the seams.</p></div></main></body></html>"""

SHORT_NEWS_WITH_CONSENT = article("Bridge reopens after repairs", body="""<p>The old stone bridge over the river reopened
on Monday after six months of repairs, and the first buses crossed it before seven in the morning.</p><p>Engineers
replaced two arches and strengthened the foundations against the winter floods.</p>""", after="""<div class="consent">
<p>We use cookies and our partners use cookies for personalised ads. Accept all or manage preferences.</p>
<button>Accept all</button><button>Reject all</button></div>""")

SHORT_POST_QUOTING_BLOCKS = article("Why scrapers see 'Access denied'", body="""<p>If your script gets a page that
says Access denied or asks you to verify you are human, the site's bot protection has stepped in. Slow down, identify
your client honestly, and use the site's API where there is one; a headless browser will not make it go away, and
retrying faster makes it worse. Many sites publish an API for exactly this reason, with keys that are free for small
projects. Read the terms first.</p>""")

FILM_NOT_FOUND = article("Not Found (2024): a review", body="""<p>The film follows a courier who cannot find the address
on her last parcel of the night, and the city keeps changing around her.</p>""" + PARAS)

# A complete German article whose comment section is for subscribers (and the page's structured data marks
# that part, not the article, as not free): the article is all there, so no paywall.
DE_TEXT = ("Im Frühjahr 2019 kehrte der Fischotter nach vierzig Jahren in das Tal zurück.",
           "Biologen zählten elf Familien am Unterlauf, die meisten in der Nähe des alten Mühlgrabens.",
           "Die ersten, die es bemerkten, waren Angler: glatte braune Köpfe tauchten zwischen dem Schilf auf.",
           "Der Rückkehr ging ein Jahrzehnt Arbeit voraus, das Wasser zu reinigen und die Ufer zu bewalden.",
           "Heute führt ein Lehrpfad am Mühlgraben entlang, und die Schule zählt die Spuren jeden Winter.")
DE_ARTICLE_COMMENTS_FOR_SUBSCRIBERS = """<!DOCTYPE html><html lang="de"><head><meta charset="utf-8">
<title>Der Fischotter ist zurück im Tal</title><script type="application/ld+json">{"@context":"https://schema.org",
"@type":"NewsArticle","headline":"Der Fischotter ist zurück im Tal","isAccessibleForFree":true,"hasPart":{"@type":
"WebPageElement","isAccessibleForFree":false,"cssSelector":".kommentare"}}</script></head><body><main><article>
<h1>Der Fischotter ist zurück im Tal</h1>""" + "".join(f"<p>{t}</p>" for t in DE_TEXT) + """</article>
<section class="kommentare" id="kommentare"><h2>Kommentare</h2><p>Kommentare nur für Abonnenten. Dieser Bereich ist nur
für Abonnenten: Jetzt abonnieren und mitdiskutieren.</p><a href="/abo">Jetzt abonnieren</a> <a href="/login">Anmelden</a>
</section></main></body></html>"""

# A complete German article with the consent dialog drawn over it: the text came through, so no wall.
DE_ARTICLE_CONSENT_DIALOG = """<!DOCTYPE html><html lang="de"><head><meta charset="utf-8"><title>Brücke wieder offen</title>
</head><body><main><article><h1>Die alte Brücke ist wieder offen</h1>""" + "".join(f"<p>{t}</p>" for t in DE_TEXT) + """
</article></main><div style="position:fixed;inset:0;z-index:9999" role="dialog" aria-modal="true"><h2>Datenschutz</h2>
<p>Wir und unsere Partner verwenden Cookies für Werbung und Analyse. Ihre Einwilligung können Sie jederzeit widerrufen.
</p><button>Zustimmen</button><button>Ablehnen</button></div></body></html>"""


def _spa_story() -> str:
    # Rendered in Chrome, the script builds the article: no js_shell after rendering.
    return ("""<!doctype html><html><head><title>Story</title></head><body><div id="root"></div><script>
document.getElementById('root').innerHTML = '<article><h1>Story</h1>' + """
            + repr("".join(f"<p>{p}</p>" for p in ARTICLE_TEXT * 2)) + """ + '</article>';</script></body></html>""")


CASES: list[Case] = [
    Case("cloudflare-js", "challenge", CLOUDFLARE_JS),
    Case("cloudflare-checking", "challenge", CLOUDFLARE_CHECKING),
    Case("cloudflare-verify", "challenge", CLOUDFLARE_VERIFY),
    Case("cloudflare-blocked", "challenge", CLOUDFLARE_BLOCKED),
    Case("datadome", "challenge", DATADOME),
    Case("datadome-captcha", "challenge", DATADOME_CAPTCHA),
    Case("perimeterx", "challenge", PERIMETERX),
    Case("human-press-hold", "challenge", HUMAN_ARE_YOU),
    Case("hcaptcha-wall", "challenge", HCAPTCHA_WALL),
    Case("recaptcha-wall", "challenge", RECAPTCHA_WALL),
    Case("turnstile-wall", "challenge", TURNSTILE_WALL),
    Case("google-sorry", "challenge", GOOGLE_SORRY),
    Case("akamai-denied", "challenge", AKAMAI_DENIED),
    Case("incapsula", "challenge", INCAPSULA),
    Case("f5-rejected", "challenge", F5_REJECTED),
    Case("aws-waf", "challenge", AWS_WAF, status=202),
    Case("amazon-robot", "challenge", AMAZON_ROBOT),
    Case("js-shell-react", "js_shell", JS_SHELL_REACT),
    Case("js-shell-next", "js_shell", JS_SHELL_NEXT),
    Case("js-shell-angular", "js_shell", JS_SHELL_ANGULAR),
    Case("login-page", "login_wall", LOGIN_PAGE, path="/account/orders", final_path="/login?return_to=%2Faccount%2Forders"),
    Case("login-in-place", "login_wall", LOGIN_PAGE),
    Case("login-required", "login_wall", LOGIN_REQUIRED),
    Case("login-sso", "login_wall", LOGIN_SSO),
    Case("consent-wall", "cookie_wall", CONSENT_WALL),
    Case("consent-wall-de", "cookie_wall", CONSENT_WALL_DE),
    Case("paywall-ldjson", "paywall", PAYWALL_LDJSON),
    Case("paywall-prompt", "paywall", PAYWALL_PROMPT),
    Case("soft-404", "soft_404", SOFT_404),
    Case("soft-404-spa", "soft_404", SOFT_404_SPA),
    Case("imperva-pardon", "challenge", PARDON_INTERRUPTION),
    Case("kasada", "challenge", KASADA),
    Case("vercel-checkpoint", "challenge", VERCEL_CHECKPOINT),
    Case("sucuri", "challenge", SUCURI),
    Case("linkedin-authwall", "login_wall", AUTHWALL, path="/in/someone", final_path="/authwall?trk=x&sessionRedirect=%2Fin%2Fsomeone"),
    Case("member-only-story", "paywall", MEMBER_ONLY),
    Case("substack-paid", "paywall", SUBSTACK_PAID),
    Case("soft-404-de", "soft_404", SOFT_404_DE),
    Case("vue-loading", "js_shell", VUE_LOADING),
    Case("pay-or-ok-de", "cookie_wall", PAY_OR_OK_DE),
    Case("consent-overlay-fr", "cookie_wall", CONSENT_OVERLAY_FR),
    Case("consent-overlay-es", "cookie_wall", CONSENT_OVERLAY_ES),
    Case("paywall-de", "paywall", PAYWALL_DE),
    # ordinary pages
    Case("article", None, article("Otters return to the valley")),
    Case("article-consent-banner", None, ONETRUST_BANNER),
    Case("article-header-login", None, HEADER_LOGIN),
    Case("article-comment-recaptcha", None, COMMENT_RECAPTCHA),
    Case("contact-form", None, CONTACT_FORM),
    Case("article-about-404", None, ARTICLE_404_TOPIC),
    Case("article-subscriber-header", None, SUBSCRIBER_FOOTER),
    Case("short-static", None, SHORT_STATIC),
    Case("short-with-analytics", None, SHORT_WITH_ANALYTICS),
    Case("cookie-policy", None, COOKIE_POLICY),
    Case("docs-auth", None, DOCS_PAGE),
    Case("search-no-results", None, SEARCH_EMPTY),
    Case("short-thread-sidebar-login", None, SHORT_THREAD_SIDEBAR_LOGIN),
    Case("short-news-consent-banner", None, SHORT_NEWS_WITH_CONSENT),
    Case("short-post-quoting-blocks", None, SHORT_POST_QUOTING_BLOCKS),
    Case("short-post-disqus", None, SHORT_POST_DISQUS),
    Case("film-not-found", None, FILM_NOT_FOUND),
    Case("de-article-comments-for-subscribers", None, DE_ARTICLE_COMMENTS_FOR_SUBSCRIBERS),
    Case("de-article-consent-dialog", None, DE_ARTICLE_CONSENT_DIALOG),
    Case("spa-rendered", None, _spa_story(), rendered=article("Story", body=PARAS)),
]


def late_article(delay_ms: int | None) -> str:
    """A loading shell ("Loading…" and a script) whose script, `delay_ms` after the load event, asks the server
    for /late/story.json and builds the article from it; with None it never does (the shell stays one)."""
    return ("""<!doctype html><html><head><meta charset="utf-8"><title>Valley news</title></head><body>
<div id="app"><div class="loader">Loading…</div></div><script>
var DELAY = """ + json.dumps(delay_ms) + """;
function show(story) {
  document.getElementById("app").innerHTML = "<main><article><h1>" + story.title + "</h1>" +
    story.paragraphs.map(function (p) { return "<p>" + p + "</p>"; }).join("") + "</article></main>";
}
if (DELAY !== null) addEventListener("load", function () {
  setTimeout(function () { fetch("/late/story.json").then(function (r) { return r.json(); }).then(show); }, DELAY);
});
</script></body></html>""")


LATE_STORY = json.dumps({"title": "Otters return to the valley", "paragraphs": ARTICLE_TEXT * 2})
