// flamegraph_browser.js - drives one perfd flame graph page in headless
// Chromium (Debian's /usr/bin/chromium, through playwright-core; no browser
// is downloaded) as a person would, and prints what it saw as one JSON
// object for test_flamegraph.py to judge.
//
// usage: node flamegraph_browser.js PAGE.html FUNCTION SCREENSHOT.png
//
// It loads the file with every request that is not the file itself
// refused (and counted), collects console errors and uncaught exceptions,
// finds FUNCTION's widest node through the page's state (window.perfdFlame),
// hovers it and reads the tooltip, clicks it with the mouse and measures it
// again, resets the zoom, types FUNCTION into the search box key by key and
// reads the matched share the page shows and the colour of the node's
// pixels, and saves a screenshot.
"use strict";

const path = require("path");
const { chromium } = require("playwright-core");

const [page_path, fn, shot] = process.argv.slice(2);
const CHROMIUM = process.env.PERFD_CHROMIUM || "/usr/bin/chromium";

async function main() {
  const report = { console_errors: [], page_errors: [], requests: [] };
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions"],
  });
  try {
    report.browser_version = browser.version();
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const url = "file://" + path.resolve(page_path);
    page.on("console", (m) => { if (m.type() === "error") report.console_errors.push(m.text()); });
    page.on("pageerror", (e) => report.page_errors.push(String(e)));
    await page.route("**/*", (route) => {
      if (route.request().url() === url) return route.continue();
      report.requests.push(route.request().url());
      return route.abort();
    });
    const t0 = Date.now();
    await page.goto(url, { waitUntil: "load" });
    await page.waitForFunction(() => window.perfdFlame && window.perfdFlame.ready, null,
                               { timeout: 20000 });
    report.load_ms = Date.now() - t0;

    const seen = await page.evaluate((name) => {
      const s = window.perfdFlame;
      const roots = [];
      for (let i = 1; i < s.nodeCount; i++) if (s.node(i).depth === 1) roots.push(s.node(i).name);
      const ids = s.find(name).sort((a, b) => s.node(b).total - s.node(a).total);
      return {
        title: document.title, summary: document.getElementById("summary").textContent,
        pruned: document.getElementById("pruned").textContent,
        scripts: document.scripts.length, node_count: s.nodeCount, roots: roots,
        canvas_width: document.getElementById("flame").clientWidth,
        hot: ids.length ? s.node(ids[0]) : null, hot_rect: ids.length ? s.rect(ids[0]) : null,
        hot_names: s.names.filter((n) => n === name).length,
      };
    }, fn);
    Object.assign(report, seen);
    if (!report.hot || !report.hot_rect) return report;
    const hot = report.hot.index, r = report.hot_rect;
    const cx = r.x + Math.min(r.width / 2, 40), cy = r.y + r.height / 2;

    await page.mouse.move(cx, cy);
    await page.waitForFunction(() => getComputedStyle(document.getElementById("tip")).display !== "none",
                               null, { timeout: 5000 });
    report.tooltip = await page.locator("#tip").textContent();

    await page.mouse.click(cx, cy);
    Object.assign(report, await page.evaluate((i) => ({
      zoom_root: window.perfdFlame.zoomRoot, zoomed_rect: window.perfdFlame.rect(i),
      zoomed_text: document.getElementById("zoomed").textContent,
      reset_enabled: !document.getElementById("reset").disabled,
    }), hot));
    await page.locator("#reset").click();
    report.zoom_after_reset = await page.evaluate(() => window.perfdFlame.zoomRoot);

    await page.locator("#search").pressSequentially(fn, { delay: 5 });
    await page.waitForFunction(() => window.perfdFlame.matchedShare !== null, null, { timeout: 5000 });
    Object.assign(report, await page.evaluate((i) => {
      const s = window.perfdFlame, rr = s.rect(i), c = document.getElementById("flame");
      const k = c.width / c.clientWidth, px = c.getContext("2d").getImageData(
        Math.round((rr.x - c.getBoundingClientRect().left + 2) * k),
        Math.round((rr.y - c.getBoundingClientRect().top + rr.height / 2) * k), 1, 1).data;
      return { match_text: document.getElementById("match").textContent,
               matched_share: s.matchedShare, hot_pixel: [px[0], px[1], px[2]] };
    }, hot));
    await page.screenshot({ path: shot, fullPage: false });
    report.screenshot = shot;
    return report;
  } finally {
    await browser.close();
  }
}

main().then((report) => {
  process.stdout.write(JSON.stringify(report) + "\n");
}, (e) => {
  process.stderr.write(String(e && e.stack || e) + "\n");
  process.exit(1);
});
