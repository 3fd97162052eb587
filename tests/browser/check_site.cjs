// Loads every page of a built site in headless Chromium (playwright-core) and reports what a person would see:
// console errors, failed requests, broken links, the step viewer's first graph, the top-kernels
// table, the report and diff pages (their SVG plots as laid out, a table sorted by a click, their kernel links and where
// the first leads), and the "Open in Perfetto" hand-off (ui.perfetto.dev is mocked by request routing: no network needed).
// Usage: node check_site.cjs SITE_DIR SHOTS_DIR [HTTP_BASE_URL]   → prints one JSON object
// (CommonJS so that NODE_PATH finds playwright-core where perfetto-check installed it)
const { htmlPages, launch, watchedPage } = require("./pages.cjs");
const fs = require("node:fs");
const path = require("node:path");
const { pathToFileURL, fileURLToPath } = require("node:url");

(async () => {

const [site, shots, httpBase] = process.argv.slice(2);
const pages = htmlPages(site);
const { browser, context } = await launch(1400, ["--disable-quic", "--disable-component-update", "--disable-sync"]);
const out = { pages: {}, brokenLinks: [], stepper: null, topKernels: [], perfetto: null, answers: {} };

for (const file of pages) {
  const { page, errors } = await watchedPage(context);
  const url = pathToFileURL(file).href;
  await page.goto(url, { waitUntil: "load" });
  await page.waitForLoadState("networkidle");
  const links = await page.$$eval("a[href], link[href], script[src]", (els) =>
    els.map((e) => e.getAttribute("href") ?? e.getAttribute("src")));
  for (const l of links) {
    if (!l || /^(https?:|mailto:|blob:|#)/.test(l)) continue;
    const target = fileURLToPath(new URL(l.split("#")[0], url));
    if (!fs.existsSync(target)) out.brokenLinks.push(`${path.relative(site, file)} -> ${l}`);
  }
  const rel = path.relative(site, file);
  out.pages[rel] = { errors, title: await page.title() };
  if (rel === "index.html") {
    out.topKernels = await page.$$eval("#top-kernels tbody tr", (rows) =>
      rows.map((r) => Array.from(r.cells).map((c) => c.textContent.trim())));
    await page.screenshot({ path: path.join(shots, "index.png"), fullPage: true });
    await page.click("#open-perfetto");
    out.fileHelpShown = await page.isVisible("#perfetto-help");
  }
  if (rel.startsWith("ctx/") && !out.stepper && (await page.$("#viewer-config"))) {  // the step viewer's first graph
    await page.waitForFunction(() => document.querySelector("#graph svg") &&
      !document.getElementById("graph").classList.contains("pending"), null, { timeout: 30000 });
    out.stepper = { page: rel, position: await page.textContent("#position") };
    await page.screenshot({ path: path.join(shots, "steps.png"), fullPage: false });
  }
  if (rel === "report.html" || rel === "diff.html") {  // SVG plots drawn at build time, tables sortable
    const plots = await page.$$eval("figure.plot svg", (svgs) => svgs.map((s) => {
      const r = s.getBoundingClientRect();
      return { id: s.closest("figure").id, width: r.width, height: r.height, texts: s.querySelectorAll("text").length };
    }));
    const sections = await page.$$eval("main section", (s) => s.map((x) => x.id));
    const table = await page.$("#kernels table.sortable");
    let sorted = null;
    if (table) {  // a click on a numeric header sorts the rows by that column's values, largest first
      const col = await table.$$eval("th", (ths) => ths.findIndex((th) => th.textContent.startsWith("Total")));
      await (await table.$$("th"))[col].click();
      sorted = await table.$$eval("tbody tr", (rows, c) => rows.map((r) => parseFloat(r.cells[c].dataset.v)), col);
    }
    const kernels = await page.$$eval("main td a", (as) => as.map((a) => [a.textContent, a.getAttribute("href")]));
    await page.screenshot({ path: path.join(shots, rel.replace(".html", ".png")), fullPage: true });
    let followed = null;
    if (kernels.length) {  // a kernel's name opens its page
      await Promise.all([page.waitForNavigation(), page.click(`main td a[href="${kernels[0][1]}"]`)]);
      followed = { name: kernels[0][0], url: page.url(), h1: await page.textContent("h1") };
    }
    out.answers[rel] = { plots, sections, sorted, kernels, followed };
  }
  if (rel.startsWith("kernel/") && !fs.existsSync(path.join(shots, "kernel.png")))
    await page.screenshot({ path: path.join(shots, "kernel.png"), fullPage: true });
  await page.close();
}

if (httpBase) {  // the postMessage hand-off, served over http like a CI artifact host
  await context.route("https://ui.perfetto.dev/**", (route) => route.fulfill({ contentType: "text/html", body:
    `<script>window.addEventListener("message", (e) => {
       if (e.data === "PING") e.source.postMessage("PONG", "*");
       else if (e.data && e.data.perfetto) document.title = "got " + e.data.perfetto.buffer.byteLength + " " + e.data.perfetto.title;
     });</script>` }));
  const page = await context.newPage();
  await page.goto(httpBase + "/index.html");
  const [popup] = await Promise.all([page.waitForEvent("popup"), page.click("#open-perfetto")]);
  await popup.waitForFunction(() => document.title.startsWith("got "), null, { timeout: 15000 });
  out.perfetto = await popup.title();
}
await browser.close();
console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
