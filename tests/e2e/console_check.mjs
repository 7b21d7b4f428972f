// Drives the console (/ui) in Debian's headless Chromium with playwright-core (tests/console_test.sh).
//   node console_check.mjs watch URL OUT_PREFIX SECONDS      loads /ui, waits for its first scrape
//        (then writes OUT_PREFIX.ready) and SECONDS more, dumps the console's
//        chart data and tiles as JSON on stdout and takes a desktop and a phone-sized screenshot
//   node console_check.mjs rollback URL OUT_PREFIX VERSION [KEY]   clicks "Roll back to vVERSION"
//        (typing KEY first when given) and prints the console's message line
import { writeFileSync } from "node:fs";
import { chromium } from "playwright-core";

const [mode, url, out, arg, key] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const fail = (msg) => { console.log(JSON.stringify({ error: msg })); process.exitCode = 1; };
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error" && !/401|404/.test(m.text())) errors.push(m.text()); });
  await page.goto(url + "/ui/", { waitUntil: "load" });
  if (mode === "watch") {
    // OUT_PREFIX.ready marks the console's first scrape, so a test can start its load then
    // (Chromium can take seconds to start on a busy machine).
    await page.waitForFunction(() => window.pagodaConsole && window.pagodaConsole.scrapeCount >= 1,
                               null, { timeout: 60000 });
    writeFileSync(out + ".ready", "");
    await page.waitForTimeout(Number(arg) * 1000);
    const state = await page.evaluate(() => {
      const C = window.pagodaConsole;
      const charts = {};
      for (const [id, ch] of Object.entries(C.charts)) charts[id] = { t: ch.t, series: ch.series, drawn: !!ch.plot };
      const tiles = {};
      for (const el of document.querySelectorAll(".tile")) tiles[el.dataset.tile] = el.querySelector("b").textContent;
      const tables = {};
      for (const id of ["alerts", "config", "blocksize", "warm", "pools", "rollout", "audit"]) {
        tables[id] = document.getElementById(id).querySelectorAll("tr").length;
      }
      const total = (sc, name) => sc.samples.filter((x) => x.name === name).reduce((a, x) => a + x.value, 0);
      const counter = document.body.dataset.kind === "router" ? "pagoda_router_requests_total" : "pagoda_requests_total";
      return { kind: document.body.dataset.kind, scrapes: C.scrapeCount, charts, tiles, tables,
               first_t: C.first.t, first_requests: total(C.first, counter), last_requests: total(C.last, counter),
               canvases: document.querySelectorAll("canvas").length };
    });
    state.page_errors = errors;
    await page.screenshot({ path: out + "-desktop.png", fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(500);
    state.phone_overflow_px = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    await page.screenshot({ path: out + "-phone.png", fullPage: false });
    console.log(JSON.stringify(state));
  } else if (mode === "rollback") {
    if (key) {
      await page.fill("#key", key);
      await page.click("#keysave");
    }
    const button = page.locator(`button[data-rollback="${arg}"]`);
    await button.waitFor({ timeout: 15000 });
    await button.click();
    await page.waitForFunction(() => /done|refused/.test(document.getElementById("message").textContent), null, { timeout: 15000 });
    const message = await page.textContent("#message");
    await page.screenshot({ path: `${out}-rollback${key ? "-key" : "-nokey"}.png`, fullPage: false });
    console.log(JSON.stringify({ message, page_errors: errors }));
  } else {
    fail(`unknown mode ${mode}`);
  }
} catch (e) {
  fail(String(e));
} finally {
  await browser.close();
}
