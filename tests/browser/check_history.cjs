// Loads every page of a `vizexport history site` folder from file:// in headless Chromium (playwright-core) and
// reports what a person would see: console errors, failed requests, broken links, each trend plot as laid out (its
// size, dots, change points), the verdict sections, a sortable table sorted by a click; screenshots of the index.
// Usage: node check_history.cjs SITE_DIR SHOTS_DIR   → prints one JSON object
const { htmlPages, launch, watchedPage } = require("./pages.cjs");
const fs = require("node:fs");
const path = require("node:path");
const { pathToFileURL, fileURLToPath } = require("node:url");

(async () => {
const [site, shots] = process.argv.slice(2);
const pages = htmlPages(site);
const { browser, context } = await launch(1300);
const out = { pages: {}, brokenLinks: [], trends: [], sections: [], sorted: null };
for (const file of pages) {
  const { page, errors } = await watchedPage(context);
  const url = pathToFileURL(file).href;
  await page.goto(url, { waitUntil: "load" });
  const links = await page.$$eval("a[href]", (els) => els.map((e) => e.getAttribute("href")));
  for (const l of links) {
    if (!l || /^(https?:|mailto:|#)/.test(l)) continue;
    if (!fs.existsSync(fileURLToPath(new URL(l.split("#")[0], url)))) out.brokenLinks.push(`${file} -> ${l}`);
  }
  const rel = path.relative(site, file);
  out.pages[rel] = { errors, title: await page.title(), links: links.length };
  if (rel === "index.html") {
    out.trends = await page.$$eval("figure.trend", (figs) => figs.map((f) => {
      const s = f.querySelector("svg"), r = s.getBoundingClientRect();
      return { title: s.querySelector("text").textContent, width: r.width, height: r.height,
               dots: s.querySelectorAll("circle").length, changePoints: s.querySelectorAll("line.change-point").length };
    }));
    out.sections = await page.$$eval("main section", (s) => s.map((x) => x.id));
    await page.screenshot({ path: path.join(shots, "history.png"), fullPage: false });
    await page.screenshot({ path: path.join(shots, "history-full.png"), fullPage: true });
    const table = await page.$("#runs table.sortable");
    await (await table.$$("th"))[0].click();  // by run number, largest first
    out.sorted = await table.$$eval("tbody tr", (rows) => rows.map((r) => parseFloat(r.cells[0].dataset.v)));
  }
  await page.close();
}
await browser.close();
console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
