// What the page checks share: the HTML files of a folder, a headless Chromium (playwright-core), and a page that
// records what a person would see go wrong (console errors, uncaught errors, failed requests).
const { chromium } = require("playwright-core");
const fs = require("node:fs");
const path = require("node:path");

function htmlPages(dir) {
  const pages = [];
  const walk = (d) => fs.readdirSync(d, { withFileTypes: true }).forEach((e) => {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p); else if (p.endsWith(".html")) pages.push(p);
  });
  walk(dir);
  return pages.sort();
}

async function launch(width, moreArgs = []) {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", ...moreArgs] });
  return { browser, context: await browser.newContext({ viewport: { width, height: 1000 } }) };
}

async function watchedPage(context) {
  const page = await context.newPage();
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("requestfailed", (r) => errors.push(`failed ${r.url()}`));
  return { page, errors };
}

module.exports = { htmlPages, launch, watchedPage };
