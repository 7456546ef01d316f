// The recordings (/recordings: a list) and one replayed (/recordings/NAME): its lines from
// /recordings/NAME/lines, a scrubber over its frames, and the actions beside them, the one shown at the
// scrubber's time marked. Everything from the file is put in the page as text.
"use strict";

const parts = location.pathname.split("/");
const name = decodeURIComponent(parts[2] || "");
let frames = [], steps = [], timer = null;

async function list() {
  document.getElementById("player").hidden = true;
  const files = await (await fetch("/recordings.json")).json();
  document.querySelector("#recordings tbody").replaceChildren(...files.map((f) => row([
    [f.name, "", `/recordings/${encodeURIComponent(f.name)}`], [f.size.toLocaleString()],
    [new Date(f.modified * 1000).toLocaleString()]])));
  document.getElementById("summary").textContent = `${files.length} recordings`;
}

// The frame shown at scrubber position i, and the last action that began before it marked.
function show(i) {
  const f = frames[i];
  if (!f) return;
  document.getElementById("frame").src = "data:image/jpeg;base64," + f.data;
  document.getElementById("scrubber").value = String(i);
  document.getElementById("position").textContent = `frame ${i + 1} of ${frames.length}, ${time(f.at)}`;
  let current = -1;
  steps.forEach((s, n) => { if (s.at <= f.at) current = n; });
  document.querySelectorAll("#timeline tbody tr").forEach((tr, n) => tr.classList.toggle("now", n === current));
  document.getElementById("url").textContent = current >= 0 ? steps[current].url || "" : "";
}

// The first frame at or after time t.
function frameAt(t) {
  const i = frames.findIndex((f) => f.at >= t);
  return i < 0 ? frames.length - 1 : i;
}

async function replay() {
  document.getElementById("list").hidden = true;
  document.getElementById("name").textContent = name;
  const response = await fetch(`/recordings/${encodeURIComponent(name)}/lines`);
  if (!response.ok) { document.getElementById("state").textContent = "No such recording."; return; }
  const lines = await response.json();
  frames = lines.filter((l) => l.type === "frame");
  steps = lines.filter((l) => l.type === "action");
  const body = document.querySelector("#timeline tbody");
  body.replaceChildren(...steps.map((s) => {
    const tr = row([[time(s.at)], [s.by], [`${s.action} ${s.detail || ""}`],
      [s.ok ? (s.message || "ok") : `${s.error}: ${s.message}`, s.ok ? "" : "error"]], "step");
    tr.addEventListener("click", () => show(frameAt(s.at)));
    return tr;
  }));
  document.querySelector("#logs tbody").replaceChildren(...lines.filter((l) => l.type === "console" || l.type === "request").map(
    (l) => row([[time(l.at)], [l.type === "console" ? `${l.level}: ${l.text}` : `${l.method} ${l.url} ${l.status ?? l.failure ?? l.blocked ?? ""}`]])));
  const end = lines.find((l) => l.type === "end");
  const truncated = lines.some((l) => l.type === "truncated");
  document.getElementById("state").textContent = `${frames.length} frames, ${steps.length} actions` +
    (truncated ? "; the recording reached its size bound and stops early" : "") + (end ? "" : "; the session did not close (the file ends early)");
  const scrubber = document.getElementById("scrubber");
  scrubber.max = String(Math.max(0, frames.length - 1));
  scrubber.addEventListener("input", () => show(Number(scrubber.value)));
  document.getElementById("play").addEventListener("click", () => {
    if (timer) { clearInterval(timer); timer = null; return; }
    timer = setInterval(() => {
      const i = Number(scrubber.value) + 1;
      if (i >= frames.length) { clearInterval(timer); timer = null; return; }
      show(i);
    }, 500);
  });
  show(0);
  document.body.dataset.loaded = "true";
}

if (name) replay(); else list();
