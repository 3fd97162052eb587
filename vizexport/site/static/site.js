// vizexport site: sortable tables and "Open in Perfetto" (the step viewer is steps.js). No dependencies, works offline.
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

// --- Open in Perfetto: ui.perfetto.dev's PING/PONG + postMessage protocol (needs http(s), not file://) ---
document.querySelectorAll(".open-perfetto").forEach((button) => {
  button.addEventListener("click", async () => {
    if (location.protocol === "file:") { document.getElementById("perfetto-help").hidden = false; return; }
    const origin = "https://ui.perfetto.dev";
    const buffer = await (await fetch(button.dataset.trace)).arrayBuffer();
    const ui = window.open(origin + "/#!/");
    if (!ui) { document.getElementById("perfetto-help").hidden = false; return; }
    const timer = setInterval(() => ui.postMessage("PING", origin), 50);
    const onMessage = (e) => {
      if (e.source !== ui || e.data !== "PONG") return;
      clearInterval(timer);
      window.removeEventListener("message", onMessage);
      const fileName = button.dataset.trace.split("/").pop();
      ui.postMessage({ perfetto: { buffer, title: button.dataset.title, fileName } }, origin);
    };
    window.addEventListener("message", onMessage);
  });
});
