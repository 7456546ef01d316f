// A browse session's page: the websocket /session/NAME/live sends what changed (a frame, timeline steps, the
// console and network panes, who holds the browser, closed); this page sends take_over, hand_back and, while
// the person holds the browser, their pointer and keys on the frame. Everything is put in the page as text.
"use strict";

const name = decodeURIComponent(location.pathname.split("/")[2] || "");
const frame = document.getElementById("frame");
let me = null, holder = null, socket = null, closed = false, lastMove = 0, profile = null;

function send(message) {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
}

function showControl() {
  const mine = holder !== null && holder === me;
  document.getElementById("control").textContent =
    closed ? "the session is closed" : holder === null ? "the agent has the browser"
      : mine ? "you have the browser: the agent's actions wait" : `${holder} has the browser`;
  document.getElementById("take-over").disabled = closed || holder !== null;
  document.getElementById("hand-back").disabled = closed || !mine;
  document.getElementById("done").disabled = closed || (holder !== null && !mine);
  frame.classList.toggle("held", mine);
  if (mine) frame.focus();
}

function update(m) {
  if (m.profile) { profile = m.profile; document.getElementById("done").hidden = false; }
  if (m.you) { me = m.you; document.getElementById("live").textContent = `live, you are ${m.you}`; document.getElementById("live").className = "on"; }
  if (m.frame) {
    frame.src = "data:image/jpeg;base64," + m.frame.data;
    frame.dataset.seq = String(m.frame.seq);
    document.getElementById("state").textContent = `${m.frame.tab}, frame ${m.frame.seq} at ${time(m.frame.at)}`;
  }
  if (m.url !== undefined) document.getElementById("url").textContent = m.url;
  if (m.actions) {
    const body = document.querySelector("#timeline tbody");
    for (const s of m.actions) {
      body.appendChild(row([[time(s.at)], [s.by], [`${s.action} ${s.detail || ""}`],
        [s.ok ? (s.message || "ok") : `${s.error}: ${s.message}`, s.ok ? "" : "error"], [s.elapsed_ms ?? ""]]));
    }
    while (body.children.length > 200) body.firstChild.remove();
  }
  if (m.console) {
    document.querySelector("#console tbody").replaceChildren(...m.console.map(
      (e) => row([[e.level, e.level === "error" ? "error" : ""], [e.text]])));
  }
  if (m.requests) {
    document.querySelector("#network tbody").replaceChildren(...m.requests.map((r) => row([[r.id], [r.method],
      [r.url, "url"], [r.blocked ? "blocked" : r.failure || r.status || "…", r.failure || r.blocked ? "error" : ""],
      [r.time_ms ?? ""]])));
  }
  if (m.control) holder = m.control.holder;
  if (m.error) document.getElementById("message").textContent = m.error;
  if (m.closed) {
    closed = true;
    document.body.classList.add("closed");
    document.getElementById("state").textContent = m.message ||
      (profile ? `The session is closed; its login is saved in profile ${profile}.` : "The session is closed.");
    document.getElementById("live").textContent = "closed";
    document.getElementById("live").className = "off";
  }
  showControl();
}

function point(e) {
  const r = frame.getBoundingClientRect();
  return { x: Math.min(1, Math.max(0, (e.clientX - r.left) / r.width)),
           y: Math.min(1, Math.max(0, (e.clientY - r.top) / r.height)) };
}

function modifiers(e) { return (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0); }

const BUTTONS = ["left", "middle", "right"];

function holding() { return !closed && holder !== null && holder === me; }

function pointer(type) {
  return (e) => {
    if (!holding()) return;
    e.preventDefault();
    if (type === "move") {
      const now = Date.now();
      if (now - lastMove < 50) return;  // at most 20 moves a second
      lastMove = now;
    }
    if (type === "down") frame.focus();
    const event = { type, ...point(e), modifiers: modifiers(e) };
    if (type === "down" || type === "up") { event.button = BUTTONS[e.button] || "left"; event.clicks = Math.min(3, Math.max(1, e.detail || 1)); }
    if (type === "wheel") { event.dx = Math.max(-10000, Math.min(10000, e.deltaX)); event.dy = Math.max(-10000, Math.min(10000, e.deltaY)); }
    send({ type: "input", event });
  };
}

function key(type) {
  return (e) => {
    if (!holding() || document.activeElement !== frame) return;
    e.preventDefault();
    send({ type: "input", event: { type, key: e.key, modifiers: modifiers(e) } });
  };
}

function connect() {
  document.getElementById("name").textContent = name;
  socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/session/${encodeURIComponent(name)}/live`);
  socket.onmessage = (e) => update(JSON.parse(e.data));
  socket.onclose = () => {
    if (!closed) { document.getElementById("live").textContent = "disconnected"; document.getElementById("live").className = "off"; }
    holder = null;
    closed = true;
    showControl();
  };
}

frame.addEventListener("mousedown", pointer("down"));
frame.addEventListener("mouseup", pointer("up"));
frame.addEventListener("mousemove", pointer("move"));
frame.addEventListener("wheel", pointer("wheel"), { passive: false });
frame.addEventListener("contextmenu", (e) => { if (holding()) e.preventDefault(); });
document.addEventListener("keydown", key("keydown"));
document.addEventListener("keyup", key("keyup"));
document.getElementById("take-over").addEventListener("click", () => { document.getElementById("message").textContent = ""; send({ type: "take_over" }); });
document.getElementById("hand-back").addEventListener("click", () => send({ type: "hand_back" }));
document.getElementById("done").addEventListener("click", () => send({ type: "done" }));
connect();
