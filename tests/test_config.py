"""Layer 1: the config file."""

import os
from pathlib import Path

import pytest

from webfetch.config import (
    Config,
    ConfigError,
    changed_keys,
    keep_running,
    load_config,
    needs_restart,
    parse_config,
    socket_path,
)


def test_every_key_is_optional(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("WEBFETCH_CONFIG", raising=False)
    assert load_config() == Config()
    assert parse_config(b"") == Config()


def test_values_are_read():
    c = parse_config(b'[browser]\nargs = ["--proxy-server=x"]\nsettle_s = 0.5\n[fetch]\nallow_hosts = ["intranet"]\n'
                     b'[cache]\nttl_s = 60\n')
    assert c.browser.args == ["--proxy-server=x"] and c.browser.settle_s == 0.5
    assert c.fetch.allow_hosts == ["intranet"] and c.cache.ttl_s == 60
    c = parse_config(b'[subagent]\nmodel = "anthropic/claude-haiku-4-5"\nthinking = "low"\n')
    assert c.subagent.model == "anthropic/claude-haiku-4-5" and c.subagent.thinking == "low"


@pytest.mark.parametrize("text,message", [
    (b"[browser]\ncolour = 1\n", "unknown key `browser.colour`"),
    (b"nonsense = 1\n", "unknown key `nonsense`"),
    (b"[fetch]\ntimeout_s = \"soon\"\n", "key `fetch.timeout_s`: Expected `float`, got `str`"),
    (b"[cache]\nmax_bytes = 0\n", "key `cache.max_bytes`: Expected `int` >= 1"),
    (b"[fetch\n", "not valid TOML"),
    (b"[subagent]\nmodel = \"haiku\"\n", "key `subagent.model`: Expected `str` matching regex"),
    (b"[subagent]\nthinking = \"Lots!\"\n", "key `subagent.thinking`: Expected `str` matching regex"),
])
def test_bad_config_is_rejected_naming_the_key(text, message):
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="config.toml")
    assert message in str(info.value)
    assert str(info.value).startswith("config.toml: ")


@pytest.mark.parametrize("text,message", [
    (b"[fetch]\nallow_private = true\n\n[browser]\n# why\ncolour = 1\n",
     "config.toml: line 6: unknown key `browser.colour`"),
    (b"[cache]\nttl_s = 1\n[fetch]\nallow_hosts = [\n  \"a\",\n  2,\n]\n",
     "config.toml: line 4: key `fetch.allow_hosts[1]`: Expected `str`, got `int`"),
    (b"fetch.timeout_s = \"soon\"\n", "config.toml: line 1: key `fetch.timeout_s`: Expected `float`"),
    (b"[colour]\nx = 1\n", "config.toml: line 1: unknown key `colour`"),
    (b"[fetch]\ntimeout_s = = 3\n", "config.toml: line 2: not valid TOML: Invalid value (column 13)"),
    (b"[fetch]\nallow_hosts = [\"a\"\n", "config.toml: not valid TOML: Unclosed array (at end of document)"),
])
def test_a_bad_config_names_the_line(text, message):
    """The line of the key (which msgspec does not give for a value) or of TOML's syntax error."""
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="config.toml")
    assert str(info.value).startswith(message)
    assert info.value.code == "config_error"


def test_what_a_reload_changes_and_what_needs_a_restart():
    old = parse_config(b'[fetch]\nallow_hosts = ["a"]\n')
    new = parse_config(b'[server]\nsocket = "/tmp/x.sock"\n[browser]\nargs = ["--x"]\nsettle_s = 1\n'
                       b'[fetch]\nallow_hosts = ["a", "b"]\n[extract]\nworkers = 3\n[search]\nlimit = 5\n')
    changed = changed_keys(old, new)
    assert changed == ["server.socket", "browser.args", "browser.settle_s", "fetch.allow_hosts", "extract.workers",
                       "search.limit"]
    restart = [k for k in changed if needs_restart(k)]
    assert restart == ["server.socket", "browser.args", "extract.workers"]
    running = keep_running(old, new, restart)
    assert changed_keys(old, running) == ["browser.settle_s", "fetch.allow_hosts", "search.limit"]


def test_missing_explicit_config_is_an_error(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")
    monkeypatch.setenv("WEBFETCH_CONFIG", str(tmp_path / "gone.toml"))
    with pytest.raises(ConfigError, match="gone.toml does not exist"):
        load_config()


def test_config_path_precedence(tmp_path, monkeypatch):
    """--config beats WEBFETCH_CONFIG beats the default path (the pi extension's daemon gets the variable)."""
    (tmp_path / "webfetch").mkdir()
    (tmp_path / "webfetch" / "config.toml").write_text("[cache]\nttl_s = 1\n")
    (tmp_path / "env.toml").write_text("[cache]\nttl_s = 2\n")
    (tmp_path / "arg.toml").write_text("[cache]\nttl_s = 3\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("WEBFETCH_CONFIG", raising=False)
    assert load_config().cache.ttl_s == 1
    monkeypatch.setenv("WEBFETCH_CONFIG", str(tmp_path / "env.toml"))
    assert load_config().cache.ttl_s == 2
    assert load_config(tmp_path / "arg.toml").cache.ttl_s == 3


def test_socket_path_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("WEBFETCH_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert str(socket_path(Config())) == "/run/user/1000/webfetch/webfetch.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    import os
    if not os.path.isdir(f"/run/user/{os.getuid()}"):
        assert str(socket_path(Config())) == f"/tmp/webfetch-{os.getuid()}/webfetch.sock"
    c = parse_config(b'[server]\nsocket = "/tmp/from-config.sock"\n')
    assert str(socket_path(c)) == "/tmp/from-config.sock"
    monkeypatch.setenv("WEBFETCH_SOCKET", "/tmp/from-env.sock")
    assert str(socket_path(c)) == "/tmp/from-env.sock"
    assert str(socket_path(c, "/tmp/flag.sock")) == "/tmp/flag.sock"


def test_the_render_cap_is_sized_for_the_machine():
    from webfetch.config import default_max_renders
    assert [default_max_renders(n) for n in (1, 2, 3, 4, 8, 64)] == [4, 8, 12, 16, 16, 16]
    assert Config().browser.max_renders is None  # unset: sized at start
    assert parse_config(b"[browser]\nmax_renders = 3\n").browser.max_renders == 3


def test_the_extract_threads_key_of_older_configs_still_sets_the_workers():
    assert parse_config(b"").extract.worker_count() == 2
    assert parse_config(b"[extract]\nthreads = 3\n").extract.worker_count() == 3
    assert parse_config(b"[extract]\nthreads = 3\nworkers = 1\n").extract.worker_count() == 1


def test_without_xdg_runtime_dir_the_socket_is_under_run_user_when_it_exists(tmp_path):
    # what an MCP client's minimal environment gives `webfetch mcp`: it must find the daemon a login shell's
    # client started (XDG_RUNTIME_DIR=/run/user/<uid>), not start another under /tmp
    from webfetch.config import default_socket_path
    uid = str(os.getuid())
    run_user = tmp_path / "run-user"
    login = default_socket_path({"XDG_RUNTIME_DIR": str(run_user / uid)}, run_user)
    assert default_socket_path({}, run_user) == Path(f"/tmp/webfetch-{uid}/webfetch.sock")  # no such directory
    (run_user / uid).mkdir(parents=True)
    assert default_socket_path({}, run_user) == login == run_user / uid / "webfetch" / "webfetch.sock"


def test_browse_allow_local_is_read_and_a_bad_entry_names_the_key_and_line():
    config = parse_config(b'[browse]\nallow_local = ["localhost:3000", "[::1]:*"]\n')
    assert config.browse.allow_local == ["localhost:3000", "[::1]:*"]
    with pytest.raises(ConfigError) as info:
        parse_config(b'[fetch]\n[browse]\nallow_local = ["localhost"]\n', source="config.toml")
    assert str(info.value).startswith("config.toml: line 2: key `browse`: browse.allow_local entry 'localhost' is "
                                      "not host:port or host:*")
    # browse.* is applied by a reload
    assert not needs_restart("browse.allow_local")


def test_doctor_and_status_show_what_browse_may_reach():
    from webfetch.frontends.doctor import check_address_policy
    from webfetch.frontends.status_cli import _browse_state

    config = parse_config(b'[browse]\nallow_local = ["localhost:3000"]\n')
    assert "browse sessions only may also reach localhost:3000 (browse.allow_local)" in \
        check_address_policy(config).detail
    assert "browse sessions reach no loopback port" in check_address_policy(parse_config(b"")).detail
    assert _browse_state({"browse_allow_local": ["localhost:3000"], "browse": []}) == \
        "enabled, may reach localhost:3000 (browse.allow_local), 0 sessions"


def test_the_main_documents_transport_is_http_unless_chrome_is_asked_for():
    assert Config().fetch.transport == "http"
    assert parse_config(b'[fetch]\ntransport = "chrome"\n').fetch.transport == "chrome"
    with pytest.raises(ConfigError) as info:
        parse_config(b'[fetch]\ntransport = "curl"\n')
    assert "fetch.transport" in str(info.value)
