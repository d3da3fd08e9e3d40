// Browser test of the example service's playground: Debian's chromium,
// headless, driven by playwright-core (no browser download), against a
// running service. Checks every dot against the database's own answers,
// hits the real limit past its capacity, and saves a screenshot.
//
//   PLAYGROUND_URL          the service, e.g. http://127.0.0.1:8080 (required)
//   PLAYGROUND_SCREENSHOT   where to save the screenshot (default playground.png)
//   CHROMIUM                the browser (default /usr/bin/chromium)
//   PGHOST, PGPORT, PGUSER, PGDATABASE   the service's database, for psql
//
// scripts/playground-test.sh starts the service and runs this file.
"use strict";
const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { execFileSync } = require("node:child_process");
const path = require("node:path");
const { chromium } = require("playwright-core");

const BASE = process.env.PLAYGROUND_URL;
const SCREENSHOT = path.resolve(process.env.PLAYGROUND_SCREENSHOT || "playground.png");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const KINDS = ["token bucket", "fixed window", "sliding window"];

let browser, page;
const requests = [];   // every URL the page asked for
const pageErrors = []; // uncaught errors in the page

// Rows of a query, each a list of fields, through psql.
function psql(sql) {
  const out = execFileSync("psql", ["-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           { encoding: "utf8" });
  return out.split("\n").filter(line => line !== "").map(line => line.split("\t"));
}

function literal(text) {
  return "'" + String(text).replace(/'/g, "''") + "'";
}

// The database's answers for a config and arrivals (milliseconds after origin).
function simulateInDatabase(config, origin, offsets) {
  return psql(`SELECT ok FROM ratelimit_simulate(${literal(JSON.stringify(config))}::jsonb,
                 ARRAY(SELECT ${literal(origin)}::timestamptz + t * interval '1 millisecond'
                       FROM unnest(${literal("{" + offsets.join(",") + "}")}::bigint[]) WITH ORDINALITY u(t, i)
                       ORDER BY i))`).map(row => row[0] === "t");
}

// Waits until the page has drawn the latest simulation asked for after the
// `seq`th; the page's state then ("ready" or "error").
async function settled(seq) {
  await page.waitForFunction(s => document.body.dataset.state !== "loading" && Number(document.body.dataset.seq) > s,
                             seq, { timeout: 30000 });
  return page.evaluate(() => document.body.dataset.state);
}

async function setControls(values) {
  const seq = Number(await page.evaluate(() => document.body.dataset.seq));
  for (const [id, value] of Object.entries(values)) {
    if (id === "pattern") await page.selectOption("#pattern", value);
    else await page.fill("#" + id, String(value));
  }
  // A simulation of all the values, whatever change events came before
  // (the page draws only its latest request).
  await page.evaluate(() => document.getElementById("rate").dispatchEvent(new Event("change")));
  return settled(seq);
}

// The dots of one lane: [{kind, i, t, ok, retryAfter}].
function dots(lane) {
  return page.$$eval(`circle.dot[data-lane="${lane}"]`, nodes => nodes.map(n => ({
    kind: n.dataset.kind, i: Number(n.dataset.i), t: Number(n.dataset.t), ok: n.dataset.ok === "true",
    retryAfter: n.dataset.retryAfter === "" ? null : Number(n.dataset.retryAfter),
    blockedClass: n.classList.contains("blocked"),
  })));
}

before(async () => {
  assert.ok(BASE, "PLAYGROUND_URL is not set");
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
  page = await browser.newPage({ viewport: { width: 1040, height: 900 } });
  page.on("request", request => requests.push(request.url()));
  page.on("pageerror", error => pageErrors.push(String(error)));
  const response = await page.goto(BASE + "/playground");
  assert.equal(response.status(), 200);
  assert.equal(await settled(0), "ready", await page.textContent("#status"));
});

after(async () => {
  if (page) {
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    console.log("playground screenshot: " + SCREENSHOT);
  }
  if (browser) await browser.close();
});

for (const pattern of ["steady", "edge", "random"]) {
  test(`the ${pattern} pattern: every dot is the database's answer`, async () => {
    assert.equal(await setControls({ rate: 4, period: 10, capacity: 4, pattern, seed: 7 }), "ready");
    const sim = await page.evaluate(() => ({ origin: window.playground.simulation.origin,
                                             arrivals: window.playground.lastRequest.arrivals }));
    const all = await dots("sim");
    let allowed = 0, blocked = 0;
    for (const kind of KINDS) {
      const config = JSON.parse(await page.getAttribute(`.panel[data-kind="${kind}"]`, "data-config"));
      assert.equal(config.kind, kind);
      assert.equal(config.rate, 4);
      assert.equal(config.period, 10000);
      if (kind === "token bucket") assert.equal(config.capacity, 4);
      const mine = all.filter(d => d.kind === kind).sort((a, b) => a.i - b.i);
      assert.deepEqual(mine.map(d => d.t), sim.arrivals, `${kind}: one dot per arrival, at its time`);
      const expected = simulateInDatabase(config, sim.origin, mine.map(d => d.t));
      assert.deepEqual(mine.map(d => d.ok), expected, `${kind}: the dots' verdicts are ratelimit_simulate's`);
      for (const d of mine) assert.equal(d.blockedClass, !d.ok, `${kind}: a blocked dot is drawn blocked`);
      allowed += expected.filter(ok => ok).length;
      blocked += expected.filter(ok => !ok).length;
    }
    // Not a vacuous comparison: the pattern is over the limit.
    assert.ok(allowed > 0 && blocked > 0, `allowed ${allowed}, blocked ${blocked}`);
  });
}

test("a burst at a window's edge: the fixed window grants twice its rate, the others do not", async () => {
  assert.equal(await setControls({ rate: 4, period: 10, capacity: 4, pattern: "edge" }), "ready");
  const burst = kind => page.$eval(`.panel[data-kind="${kind}"]`, panel => {
    const rect = panel.querySelector("rect.burst");
    return rect ? Number(rect.dataset.burst) : 0;
  });
  assert.equal(await burst("fixed window"), 8);
  assert.match(await page.textContent('.panel[data-kind="fixed window"] .burst-label'), /double burst/);
  assert.ok(await burst("token bucket") < 8);
  assert.ok(await burst("sliding window") < 8);
  // The bucket's level and the sliding window's weighted previous window are drawn.
  const levelPoints = await page.$eval('.panel[data-kind="token bucket"] [data-series="level"]',
                                       p => p.getAttribute("points").trim().split(/\s+/).length);
  assert.ok(levelPoints >= 240, `level points: ${levelPoints}`);
  assert.ok(await page.locator('.panel[data-kind="sliding window"] [data-series="weighted-previous"]').count() >= 1);
  assert.ok(await page.locator('.panel[data-kind="fixed window"] line.edge').count() >= 3);
});

test("the sliding window's picture is the extension's: floor(previous × weight) + current = rate − remaining", async () => {
  assert.equal(await setControls({ rate: 4, period: 10, capacity: 4, pattern: "edge" }), "ready");
  const { calls, levels } = await page.evaluate(() =>
    window.playground.simulation.algorithms.find(a => a.kind === "sliding window"));
  const P = 10000, rate = 4;
  const granted = (from, to) => calls.filter(c => c.ok && c.t >= from && c.t <= to).reduce((s, c) => s + c.count, 0);
  let weighted = 0;
  for (const { t, remaining } of levels) {
    const k = Math.floor(t / P), a = k * P;
    const prev = k > 0 ? granted(a - P, a - 1) : 0;
    const exact = prev * (1 - (t - a) / P);
    const estimate = Math.floor(exact + 1e-9) + granted(a, t);  // a probe follows an arrival at its time
    if (prev > 0 && t > a) weighted++;
    // At an exact integer crossing, rounding may fall either side.
    const crossing = Math.abs(exact - Math.round(exact)) < 1e-6;
    const difference = Math.abs(rate - remaining - estimate);
    assert.ok(difference < 1e-9 || (crossing && difference <= 1 + 1e-9),
              `at ${t} ms: rate − remaining = ${rate - remaining}, floor(${prev} × weight) + current = ${estimate}`);
  }
  assert.ok(weighted > 50, `probes that weigh a previous window: ${weighted}`);
});

test("bad input is the extension's 22023, shown as an error", async () => {
  assert.equal(await setControls({ rate: 0 }), "error");
  assert.match(await page.textContent("#status"), /rate/);
  assert.equal(await page.locator("circle.dot").count(), 0);
});

test("Hit: a real request through a real limit, blocked past its capacity with retry_after", async () => {
  assert.equal(await setControls({ rate: 3, period: 60, capacity: 3, pattern: "edge" }), "ready");
  for (let n = 1; n <= 4; n++) {
    await page.click("#hit");
    await page.waitForFunction(n => Number(document.body.dataset.hits) === n, n, { timeout: 30000 });
  }
  const hits = await dots("hit");
  for (const kind of KINDS) {
    const mine = hits.filter(d => d.kind === kind).sort((a, b) => a.t - b.t);
    assert.deepEqual(mine.map(d => d.ok), [true, true, true, false], `${kind}: three allowed, then blocked`);
    assert.ok(mine[3].retryAfter > 0, `${kind}: retry_after ${mine[3].retryAfter}`);
    assert.ok(mine[3].blockedClass);
    assert.match(await page.textContent(`.panel[data-kind="${kind}"] [data-retry-label]`), /retry_after \d/);
  }
  assert.match(await page.textContent("#hits-log"), /#4 .*blocked, retry_after/);
  // The limit in the database is spent too: what ratelimit_check answers now.
  const answers = await page.evaluate(() => window.playground.hits.filter(h => h.n === 4));
  assert.equal(answers.length, 3);
  for (const h of answers) {
    const [[ok]] = psql(`SELECT ok FROM ratelimit_check('playground', ${literal(h.key)}, ${literal(JSON.stringify(h.config))}::jsonb)`);
    assert.equal(ok, "f", `${h.kind}: ratelimit_check after the blocked hit`);
  }
});

test("the page fetched nothing but the service's own URLs, and raised no error", () => {
  assert.ok(requests.length >= 3, `requests: ${requests.length}`);
  for (const url of requests) assert.ok(url.startsWith(BASE + "/"), `a request outside the service: ${url}`);
  assert.deepEqual(pageErrors, []);
});
