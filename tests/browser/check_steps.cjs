// The step viewer of one context page, driven in headless Chromium (playwright-core) as a person would use it.
// Usage: node check_steps.cjs PAGE_URL SPEC.json   → prints one JSON object
// SPEC: {"dots": [[rewrite, step], …]}  steps whose DOT text and diff lines to return (compared with Python's);
//       "random": n, "seed": k, "maxNodes": m   n random steps with at most m drawn boxes: the time until each is
//       shown, and whether the shown SVG holds the step's new nodes with their classes;
//       "keys": n   n fast → presses from the start of the longest rewrite, then what is finally shown;
//       "zoom": true   the view of the step with the most drawn boxes, fitted, after a wheel, a drag, F, +, a ← and
//       the 1:1 button: the SVG's viewBox, the scale, and the graph point under the pointer before and after the wheel;
//       "shot": path   a screenshot at the end.
const { chromium } = require("playwright-core");
const fs = require("node:fs");

// The viewer's zoom as a person drives it: each view as {viewBox, scale, auto, level, bounds} (graph points).
async function zoomViews(page) {
  const view = () => page.evaluate(() => {
    const z = window.vizexportViewer.zoom, svg = document.querySelector("#graph svg");
    return { viewBox: svg.getAttribute("viewBox"), scale: z.scale, auto: z.auto, bounds: z.bounds,
             level: document.getElementById("zoom-level").textContent, step: window.vizexportViewer.shown() };
  });
  const settled = () => page.waitForFunction(() => !document.getElementById("graph").classList.contains("pending"));
  const biggest = await page.evaluate(() => {
    const v = window.vizexportViewer;
    let best = null;
    for (const rw of v.rewrites) for (const st of rw.steps) {
      const d = st.sink >= 0 ? v.stepGraph(rw, st.i) : null;
      if (d && (!best || d.dot.nodes > best.nodes)) best = { r: rw.index, s: st.i, nodes: d.dot.nodes };
    }
    v.go(best.r, best.s);
    return best;
  });
  await page.waitForFunction((k) => document.getElementById("graph").dataset.step === k, `${biggest.r}:${biggest.s}`);
  await settled();
  const box = await (await page.$("#graph")).boundingBox();
  const at = [box.x + box.width * 0.5 + 10, box.y + box.height * 0.35];  // on the fitted graph, off its middle
  const under = () => page.evaluate(([px, py]) => {  // the graph point under the pointer
    const z = window.vizexportViewer.zoom, r = document.getElementById("graph").getBoundingClientRect();
    return [z.x + (px - r.left) / z.scale, z.y + (py - r.top) / z.scale];
  }, at);
  const inner = await page.$eval("#graph", (g) => [g.clientWidth, g.clientHeight]);  // the box less its border
  const out = { biggest, box: inner, fitted: await view() };
  await page.mouse.move(...at);
  const before = await under();
  await page.mouse.wheel(0, -400);
  await page.waitForTimeout(100);
  out.wheel = { ...(await view()), before, after: await under() };
  await page.mouse.down();
  await page.mouse.move(at[0] - 120, at[1] - 60, { steps: 4 });
  await page.mouse.up();
  out.dragged = await view();
  await page.keyboard.press("f");
  out.fit = await view();
  await page.keyboard.press("+");
  out.plus = await view();
  await page.keyboard.press(biggest.s > 0 ? "ArrowLeft" : "ArrowRight");  // another step keeps the view chosen
  await settled();
  out.next = await view();
  await page.click("#zoom-actual");
  out.actual = await view();
  return out;
}

(async () => {
const [url, specPath] = process.argv.slice(2);
const spec = JSON.parse(fs.readFileSync(specPath, "utf8"));
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"] });
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
const errors = [];
page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
page.on("pageerror", (e) => errors.push(String(e)));
const t0 = Date.now();
await page.goto(url);
await page.waitForFunction(() => window.vizexportViewer && document.querySelector("#graph svg")
  && !document.getElementById("graph").classList.contains("pending"), null, { timeout: 60000 });
const out = { firstGraphMs: Date.now() - t0, errors };

// what the page shows now: its step key, and which of the step's new nodes its SVG holds (by id and class)
const SHOWN = `() => {
  const v = window.vizexportViewer, box = document.getElementById("graph"), key = v.shown();
  const [r, s] = key.split(":").map(Number), d = v.stepGraph(v.rewrites[r], s);
  const check = (set, cls) => [...set].filter((n) => d.dot.ids.has(n)).map((n) => {
    const g = box.querySelector("svg g#" + d.dot.ids.get(n));
    return g ? (g.classList.contains(cls) ? "ok" : "class") : "missing";
  });
  return { key, boxStep: box.dataset.step, pending: box.classList.contains("pending"),
           created: check(d.created, "created"), rebuilt: check(d.rebuilt, "rebuilt") };
}`;

out.dots = await page.evaluate((pairs) => pairs.map(([r, s]) => {
  const v = window.vizexportViewer, rw = v.rewrites[r], d = v.stepGraph(rw, s), st = rw.steps[s];
  return { r, s, dot: d.dot ? d.dot.text : null, diff: st.before >= 0 && st.after >= 0 ? v.diff(st) : null };
}), spec.dots || []);

if (spec.random) {
  const picks = await page.evaluate(({ n, seed, maxNodes }) => {
    let x = seed >>> 0;
    const rand = () => ((x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32);
    const v = window.vizexportViewer, all = [];
    v.rewrites.forEach((rw) => rw.steps.forEach((st) => { if (st.sink >= 0) all.push([rw.index, st.i]); }));
    const out = [];
    for (let tries = 0; out.length < n && tries < 50 * n; tries++) {
      const [r, s] = all[Math.floor(rand() * all.length)];
      const d = v.stepGraph(v.rewrites[r], s);
      if (d.dot.nodes <= maxNodes) out.push([r, s]);
    }
    return out;
  }, { n: spec.random, seed: spec.seed || 1, maxNodes: spec.maxNodes || 400 });
  out.random = [];
  for (const [r, s] of picks) {
    const ms = await page.evaluate(([r, s]) => new Promise((done) => {
      const start = performance.now(), box = document.getElementById("graph"), key = `${r}:${s}`;
      const ready = () => box.dataset.step === key && !box.classList.contains("pending");
      const poll = () => (ready() ? done(performance.now() - start) : requestAnimationFrame(poll));
      window.vizexportViewer.go(r, s);
      poll();
    }), [r, s]);
    out.random.push({ r, s, ms, ...(await page.evaluate(`(${SHOWN})()`)) });
  }
}

if (spec.keys) {
  const longest = await page.evaluate(() => window.vizexportViewer.rewrites.reduce((a, b) =>
    (b.steps.length > a.steps.length ? b : a)).index);
  await page.click(`[data-rewrite="${longest}"]`);
  for (let i = 0; i < spec.keys; i++) await page.keyboard.press("ArrowRight", { delay: 0 });
  const position = await page.textContent("#position");
  await page.waitForFunction(() => !document.getElementById("graph").classList.contains("pending"), null,
                             { timeout: 30000 });
  await page.waitForTimeout(300);  // a late layout of a skipped step would land here
  out.keys = { rewrite: longest, position, ...(await page.evaluate(`(${SHOWN})()`)) };
  out.lists = await page.evaluate(() => {  // the numbers of both lists: shown in full and in order
    const nums = (sel) => [...document.querySelectorAll(sel)];
    const clipped = (els) => els.filter((e) => e.scrollWidth > e.clientWidth + 1).length;
    const inOrder = (els) => els.every((e, i) => e.textContent === String(i));
    const rw = nums("#rewrite-list .num"), st = nums("#step-list .num");
    return { rewrites: rw.length, steps: st.length, clipped: clipped(rw) + clipped(st), inOrder: inOrder(rw) && inOrder(st) };
  });
}
if (spec.zoom) out.zoom = await zoomViews(page);
if (spec.shot) await page.screenshot({ path: spec.shot });
await browser.close();
console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
