// flamegraph_browser.js - drives one perfd flame graph in headless Chromium
// (Debian's /usr/bin/chromium, through playwright-core; no browser is
// downloaded) as a person would, and prints what it saw as one JSON object
// for test_flamegraph.py and test_diff.py to judge.
//
// usage: node flamegraph_browser.js FILE FUNCTION SCREENSHOT.png [OTHER...]
//
// Every file is loaded with every request that is not the file itself
// refused (and counted), console errors and uncaught exceptions collected,
// and a screenshot saved.
//
// A page (FILE.html): it finds FUNCTION's widest node through the page's
// state (window.perfdFlame), reads the colour of FUNCTION's and each
// OTHER's node on the canvas, hovers FUNCTION and reads the tooltip, clicks
// it with the mouse and measures it again, resets the zoom, types FUNCTION
// into the search box key by key and reads the matched share the page shows
// and the colour of the node's pixels.  On a differential page it then
// clears the search (the screenshot shows the page's own colours), switches
// the widths to BEFORE's, as a person would with the radio button, and
// reads each OTHER's node and colour there.
//
// An SVG (FILE.svg): loaded as a document (an XML error would show as a
// <parsererror> page, not a console error, so the root element is checked)
// and as an <img> (it must decode); per FUNCTION and OTHER, the rendered
// width of its outermost frames (getBBox of their <rect>s: a frame is a
// <g> whose <title> starts with its name) against the "all" frame's, and
// each one's fill.
"use strict";

const fs = require("fs");
const path = require("path");
const { chromium } = require("playwright-core");

const [page_path, fn, shot, ...others] = process.argv.slice(2);
const CHROMIUM = process.env.PERFD_CHROMIUM || "/usr/bin/chromium";

// The colour of the canvas pixel a little inside node i's box.
function pixelOf(i) {
  const s = window.perfdFlame, r = s.rect(i), c = document.getElementById("flame");
  if (!r) return null;
  const k = c.width / c.clientWidth, b = c.getBoundingClientRect();
  const px = c.getContext("2d").getImageData(Math.round((r.x - b.left + 2) * k),
                                             Math.round((r.y - b.top + r.height / 2) * k), 1, 1).data;
  return [px[0], px[1], px[2]];
}

// Node, box and pixel of each name's widest node as drawn now.
function nodesOf([names, pixel]) {
  const s = window.perfdFlame, out = {};
  const px = new Function("return " + pixel)();
  for (const name of names) {
    const ids = s.find(name).sort((a, b) => s.node(b).total - s.node(a).total);
    out[name] = ids.length ? { node: s.node(ids[0]), rect: s.rect(ids[0]), pixel: px(ids[0]),
                               count: ids.length } : null;
  }
  return out;
}

async function drivePage(page, report) {
  await page.waitForFunction(() => window.perfdFlame && window.perfdFlame.ready, null,
                             { timeout: 20000 });
  report.load_ms = Date.now() - report.t0;
  const seen = await page.evaluate((name) => {
    const s = window.perfdFlame;
    const roots = [];
    for (let i = 1; i < s.nodeCount; i++) if (s.node(i).depth === 1) roots.push(s.node(i).name);
    const ids = s.find(name).sort((a, b) => s.node(b).total - s.node(a).total);
    return {
      title: document.title, summary: document.getElementById("summary").textContent,
      pruned: document.getElementById("pruned").textContent,
      gone: document.getElementById("gone").textContent,
      legend: document.getElementById("legend").textContent,
      diff: s.diff, scripts: document.scripts.length, node_count: s.nodeCount, roots: roots,
      canvas_width: document.getElementById("flame").clientWidth,
      hot: ids.length ? s.node(ids[0]) : null, hot_rect: ids.length ? s.rect(ids[0]) : null,
      hot_names: s.names.filter((n) => n === name).length,
    };
  }, fn);
  Object.assign(report, seen);
  report.nodes = await page.evaluate(nodesOf, [[fn, ...others], pixelOf.toString()]);
  if (!report.hot || !report.hot_rect) return;
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
  Object.assign(report, await page.evaluate(([i, pixel]) => {
    const s = window.perfdFlame;
    return { match_text: document.getElementById("match").textContent,
             matched_share: s.matchedShare, hot_pixel: new Function("return " + pixel)()(i) };
  }, [hot, pixelOf.toString()]));
  // a differential page is shot in its own colours, the search cleared
  if (report.diff) await page.locator("#search").fill("");
  await page.screenshot({ path: shot, fullPage: false });
  report.screenshot = shot;

  if (report.diff) {
    await page.locator("input[name=widths][value=before]").check();
    await page.waitForFunction(() => window.perfdFlame.view() === "before", null, { timeout: 5000 });
    report.before_view = await page.evaluate(nodesOf, [others, pixelOf.toString()]);
    const b = shot.replace(/\.png$/, "") + "-before.png";
    await page.screenshot({ path: b, fullPage: false });
    report.before_screenshot = b;
  }
}

async function driveSvg(page, report) {
  report.load_ms = Date.now() - report.t0;
  Object.assign(report, await page.evaluate((names) => {
    const root = document.documentElement, ns = "http://www.w3.org/2000/svg";
    const out = { root: root.localName, root_ns: root.namespaceURI,
                  parsererror: document.getElementsByTagName("parsererror").length,
                  groups: document.getElementsByTagNameNS(ns, "g").length, frames: {} };
    const frames = [];
    for (const g of document.getElementsByTagNameNS(ns, "g")) {
      const t = g.getElementsByTagNameNS(ns, "title")[0], r = g.getElementsByTagNameNS(ns, "rect")[0];
      if (t && r) frames.push({ name: t.textContent.split("\n")[0], title: t.textContent, rect: r });
    }
    const all = frames.find((f) => f.name === "all");
    out.all_width = all ? all.rect.getBBox().width : null;
    for (const name of names) {
      const mine = frames.filter((f) => f.name === name).map((f) => ({ f, b: f.rect.getBBox() }));
      // outermost only: a frame inside another of the same name (recursion)
      // is within its x range one row or more below
      const outer = mine.filter((a) => !mine.some((o) => o !== a && o.b.y < a.b.y &&
        o.b.x <= a.b.x + 0.01 && a.b.x + a.b.width <= o.b.x + o.b.width + 0.01));
      out.frames[name] = {
        count: mine.length, width: outer.reduce((s, o) => s + o.b.width, 0),
        fills: outer.map((o) => o.f.rect.getAttribute("fill")),
        titles: outer.slice(0, 2).map((o) => o.f.title),
      };
    }
    return out;
  }, [fn, ...others]));
  await page.screenshot({ path: shot, fullPage: false });
  report.screenshot = shot;
  // as an image, from a data: URL (a file: URL would be cross-origin here)
  const data = "data:image/svg+xml;base64," + fs.readFileSync(page_path).toString("base64");
  await page.goto("about:blank");
  await page.setContent("<!DOCTYPE html><title>img</title><body></body>");
  report.as_image = await page.evaluate((src) => new Promise((done) => {
    const img = new Image();
    img.onload = () => done({ ok: true, width: img.naturalWidth, height: img.naturalHeight });
    img.onerror = () => done({ ok: false });
    img.src = src;
  }), data);
}

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
      const u = route.request().url();
      if (u === url || u.startsWith("data:")) return route.continue();
      report.requests.push(u);
      return route.abort();
    });
    report.t0 = Date.now();
    await page.goto(url, { waitUntil: "load" });
    if (page_path.endsWith(".svg")) await driveSvg(page, report);
    else await drivePage(page, report);
    delete report.t0;
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
