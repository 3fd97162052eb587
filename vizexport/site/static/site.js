// vizexport site: sortable tables, the rewrite step viewer, and "Open in Perfetto". No dependencies, works offline.
"use strict";

// --- sortable tables: click a header; numbers sort by data-v ---
document.querySelectorAll("table.sortable").forEach((table) => {
  table.querySelectorAll("th").forEach((th, col) => {
    th.addEventListener("click", () => {
      const body = table.tBodies[0];
      const num = th.dataset.type === "num";
      const desc = th.dataset.dir !== "desc";
      table.querySelectorAll("th").forEach((h) => delete h.dataset.dir);
      th.dataset.dir = desc ? "desc" : "asc";
      const key = (row) => { const c = row.cells[col]; return num ? parseFloat(c.dataset.v) : c.textContent.trim(); };
      const rows = Array.from(body.rows).sort((a, b) => {
        const x = key(a), y = key(b);
        const r = num ? x - y : x.localeCompare(y);
        return desc ? -r : r;
      });
      rows.forEach((r) => body.appendChild(r));
    });
  });
});

// --- rewrite step viewer: ←/→ move through steps, ↑/↓ through rewrites ---
// A site keeps its graphs in per-context scripts (rewrites/packs/*.js): one gzip stream with an index of
// [offset, length] per graph. Without a pack, a step names its SVG file.
const packed = new Map();
(window.vizexportPacks || []).forEach((p) => Object.entries(p.index).forEach(([k, at]) => packed.set(k, [p, ...at])));
const streams = new Map(), graphUrls = new Map();
const unpack = (p) => {
  if (!streams.has(p)) {
    const gz = Uint8Array.from(atob(p.data), (c) => c.charCodeAt(0));
    streams.set(p, new Response(new Blob([gz]).stream().pipeThrough(new DecompressionStream("gzip"))).arrayBuffer());
  }
  return streams.get(p);
};
const graphUrl = async (key) => {
  if (!packed.has(key)) return key;
  if (!graphUrls.has(key)) {
    const [p, offset, length] = packed.get(key);
    const svg = new Uint8Array(await unpack(p), offset, length);
    graphUrls.set(key, URL.createObjectURL(new Blob([svg], { type: "image/svg+xml" })));
  }
  return graphUrls.get(key);
};
const stepsData = document.getElementById("steps");
if (stepsData) {
  const rewrites = JSON.parse(stepsData.textContent);
  let r = 0, s = 0;
  const $ = (id) => document.getElementById(id);
  const show = () => {
    const rw = rewrites[r];
    if (!rw) return;
    const step = rw.steps[s] || {};
    $("position").textContent = `${rw.name || "rewrite"} · step ${s} of ${rw.steps.length - 1}`;
    const info = [];
    if (step.loc) info.push(`pattern ${step.loc[0]}:${step.loc[1]}`);
    if (step.seconds != null) info.push(`${(step.seconds * 1e6).toFixed(1)} µs`);
    if (step.changed != null) info.push(`${step.changed} nodes created`);
    if (step.error) info.push(`error: ${step.error}`);
    if (step.note) info.push(step.note);
    $("step-info").textContent = info.join(" · ");
    $("svg").hidden = !step.svg;
    $("no-svg").hidden = !!step.svg;
    if (step.svg) graphUrl(step.svg).then((url) => { if (rewrites[r].steps[s] === step) $("svg").src = url; });
    $("diff").textContent = step.diff || "";
    $("prev").disabled = s === 0;
    $("next").disabled = s >= rw.steps.length - 1;
    const list = $("step-list");
    list.replaceChildren(...rw.steps.map((st, i) => {
      const li = document.createElement("li");
      li.textContent = st.loc ? `${st.loc[0].split("/").pop()}:${st.loc[1]}` : (i === 0 ? "input" : "step");
      li.classList.toggle("drawn", !!st.svg);
      li.classList.toggle("current", i === s);
      li.addEventListener("click", () => { s = i; show(); });
      return li;
    }));
    document.querySelectorAll("[data-rewrite]").forEach((a) => a.classList.toggle("current", +a.dataset.rewrite === rw.index));
    history.replaceState(null, "", `#r${rw.index}s${s}`);
  };
  const go = (dr, ds) => {
    if (dr) { r = Math.max(0, Math.min(rewrites.length - 1, r + dr)); s = 0; }
    else s = Math.max(0, Math.min(rewrites[r].steps.length - 1, s + ds));
    show();
  };
  $("prev").addEventListener("click", () => go(0, -1));
  $("next").addEventListener("click", () => go(0, 1));
  document.addEventListener("keydown", (e) => {
    const k = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] }[e.key];
    if (k) { e.preventDefault(); go(...k); }
  });
  document.querySelectorAll("[data-rewrite]").forEach((a) => a.addEventListener("click", (e) => {
    e.preventDefault();
    r = rewrites.findIndex((x) => x.index === +a.dataset.rewrite); s = 0; show();
  }));
  const m = location.hash.match(/^#r(\d+)(?:s(\d+))?$/);
  if (m) { r = Math.max(0, rewrites.findIndex((x) => x.index === +m[1])); s = +(m[2] || 0); }
  show();
}

// --- Open in Perfetto: ui.perfetto.dev's PING/PONG + postMessage protocol (needs http(s), not file://) ---
const openButton = document.getElementById("open-perfetto");
if (openButton) {
  openButton.addEventListener("click", async () => {
    if (location.protocol === "file:") { document.getElementById("perfetto-help").hidden = false; return; }
    const origin = "https://ui.perfetto.dev";
    const buffer = await (await fetch(openButton.dataset.trace)).arrayBuffer();
    const ui = window.open(origin + "/#!/");
    if (!ui) { document.getElementById("perfetto-help").hidden = false; return; }
    const timer = setInterval(() => ui.postMessage("PING", origin), 50);
    const onMessage = (e) => {
      if (e.source !== ui || e.data !== "PONG") return;
      clearInterval(timer);
      window.removeEventListener("message", onMessage);
      ui.postMessage({ perfetto: { buffer, title: openButton.dataset.title, fileName: openButton.dataset.trace } }, origin);
    };
    window.addEventListener("message", onMessage);
  });
}
