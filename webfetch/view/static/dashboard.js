// The dashboard: state from the websocket /live (once a second), put in the page as text only.
"use strict";

function fill(id, pairs) {
  const dl = document.getElementById(id);
  dl.replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", k), el("dd", v)]));
}

function rows(id, items, cells) {
  document.querySelector(`#${id} tbody`).replaceChildren(...items.map((item) => row(cells(item))));
}

function chart(times) {
  const svg = document.getElementById("chart");
  const now = Date.now() / 1000, max = Math.max(1000, ...times.map((p) => p[1]));
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren(...times.map(([t, ms]) => {
    const c = document.createElementNS(ns, "circle");
    c.setAttribute("cx", String(600 - (now - t) / 6));
    c.setAttribute("cy", String(115 - 110 * ms / max));
    c.setAttribute("r", "2");
    return c;
  }));
  svg.setAttribute("aria-label", `${times.length} requests, slowest ${Math.round(max)} ms`);
}

function show(s) {
  const st = s.status, d = st.daemon || {};
  fill("daemon", [["version", st.version], ["pid", d.pid], ["uptime", `${Math.round(st.uptime_s)} s`],
    ["socket", d.socket], ["config", d.config || "(defaults)"], ["served", st.requests.served]]);
  fill("browser", [["Chrome", `${st.browser.state} ${st.browser.version || ""}`],
    ["parser workers", s.workers.parsers], ["sub-agent", `${st.subagent.command} ${st.subagent.available ? "available" : "unavailable"}`],
    ["sub-agents at once", s.workers.subagents], ["problems", st.problems.join("; ") || "none"]]);
  const c = st.cache;
  fill("cache", [["pages", c.entries], ["bytes", c.bytes], ["hits", c.hits], ["misses", c.misses],
    ["on disk", `${c.disk_entries} (${c.disk_bytes} bytes)`]]);
  const now = Date.now() / 1000;
  rows("in-flight", s.in_flight, (r) => [[r.op], [r.url, "url"], [`${Math.round(now - r.started)} s`], [r.progress]]);
  rows("recent", s.recent, (r) => [[time(r.started)], [r.op], [r.url, "url"], [r.ms],
    [r.outcome + (r.cached ? " (cached)" : ""), r.outcome === "ok" ? "" : "error"], [r.flags.join(", ")]]);
  rows("sessions", st.browse, (b) => [[b.session, "", `/session/${encodeURIComponent(b.session)}`], [b.tabs],
    [b.url, "url"], [Math.round(b.idle_s)]]);
  fill("config", Object.entries(s.config).flatMap(([section, values]) =>
    Object.entries(values).map(([k, v]) => [`${section}.${k}`, JSON.stringify(v)])));
  chart(s.times);
}

// The recordings, newest first, each a link to its replay (read at load and every RECORDINGS_MS: a file
// list, not part of the live state).
const RECORDINGS_MS = 10000;

async function recordings() {
  const response = await fetch("/recordings.json");
  if (response.ok) {
    rows("recordings", (await response.json()).slice(0, 20), (f) => [
      [f.name, "", `/recordings/${encodeURIComponent(f.name)}`], [f.size.toLocaleString()],
      [new Date(f.modified * 1000).toLocaleString()]]);
  }
  setTimeout(recordings, RECORDINGS_MS);
}

function connect() {
  const live = document.getElementById("live");
  const ws = new WebSocket(`ws://${location.host}/live`);
  ws.onopen = () => { live.textContent = "live"; live.className = "on"; };
  ws.onmessage = async (m) => show(JSON.parse(typeof m.data === "string" ? m.data : await m.data.text()));
  ws.onclose = () => { live.textContent = "disconnected; retrying"; live.className = "off"; setTimeout(connect, 2000); };
}

connect();
recordings();
