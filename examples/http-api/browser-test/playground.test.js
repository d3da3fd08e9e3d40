// Browser test of the example service's playground: Debian's chromium,
// headless, driven by playwright-core (no browser download), against a
// running service, at 1280×900 and 390×844 (touch). It checks every dot of
// the three algorithms against the database's own answers, the page's own
// lanes (the exact sliding window, the fixed window opening at the first
// request) against an independent computation, the layout (no horizontal
// overflow, panels side by side where they fit), keyboard and touch use,
// labels and live regions, the errors in the fields' words, the notice when
// traffic is cut, Hit through the real limits with their headers, and the
// moving "now" with its countdowns under a clock the test drives; and saves
// screenshots of both widths.
//
//   PLAYGROUND_URL             the service, e.g. http://127.0.0.1:8080 (required)
//   PLAYGROUND_SCREENSHOT_DIR  where to save playground-1280.png and playground-390.png
//                              (default: the current directory)
//   CHROMIUM                   the browser (default /usr/bin/chromium)
//   PGHOST, PGPORT, PGUSER, PGDATABASE   the service's database, for psql
//
// scripts/playground-test.sh starts the service and runs this file.
"use strict";
const { test, before, after, describe } = require("node:test");
const assert = require("node:assert/strict");
const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
const { chromium } = require("playwright-core");

const BASE = process.env.PLAYGROUND_URL;
const SHOTS = path.resolve(process.env.PLAYGROUND_SCREENSHOT_DIR || ".");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const KINDS = ["token bucket", "fixed window", "sliding window"];

let browser;
before(async () => {
  assert.ok(BASE, "PLAYGROUND_URL is not set");
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
});
after(async () => { if (browser) await browser.close(); });

// ---- helpers -----------------------------------------------------------------

// Rows of a query, each a list of fields, through psql.
function psql(sql) {
  const out = execFileSync("psql", ["-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                           { encoding: "utf8" });
  return out.split("\n").filter(line => line !== "").map(line => line.split("\t"));
}

function literal(text) {
  return "'" + String(text).replace(/'/g, "''") + "'";
}

// The database's verdicts for a config and arrivals (milliseconds after origin).
function simulateInDatabase(config, origin, offsets) {
  return psql(`SELECT ok FROM ratelimit_simulate(${literal(JSON.stringify(config))}::jsonb,
                 ARRAY(SELECT ${literal(origin)}::timestamptz + t * interval '1 millisecond'
                       FROM unnest(${literal("{" + offsets.join(",") + "}")}::bigint[]) WITH ORDINALITY u(t, i)
                       ORDER BY i))`).map(row => row[0] === "t");
}

// The article's exact sliding window, written again here: a request is
// granted while fewer than `rate` were granted in (t - period, t].
function exactLog(arrivals, rate, period) {
  const granted = [];
  return arrivals.map(t => {
    const inWindow = granted.filter(g => g > t - period).length;
    if (inWindow < rate) { granted.push(t); return true; }
    return false;
  });
}

// The article's fixed window with a user-defined start, written again here.
function windowAtFirstRequest(arrivals, rate, period) {
  let opened = -Infinity, used = 0;
  return arrivals.map(t => {
    if (t >= opened + period) { opened = t; used = 0; }
    if (used < rate) { used++; return true; }
    return false;
  });
}

// A PNG's size, from its header.
function pngSize(file) {
  const data = fs.readFileSync(file);
  return { width: data.readUInt32BE(16), height: data.readUInt32BE(20) };
}

// Polls `predicate` in the page from node (node's timers are real, so this
// works while the page's clock is paused).
async function until(page, predicate, arg, what) {
  for (let i = 0; i < 600; i++) {
    if (await page.evaluate(predicate, arg)) return;
    await new Promise(resolve => setTimeout(resolve, 50));
  }
  assert.fail("timed out waiting for " + what);
}

// A page with its own browser context: the clock installed (time flows
// until the test pauses it), every request and error recorded.
async function openPage(viewport, touch) {
  const context = await browser.newContext({ viewport, hasTouch: touch, isMobile: touch });
  await context.clock.install({ time: Date.now() });
  const page = await context.newPage();
  const seen = { requests: [], errors: [] };
  page.on("request", request => seen.requests.push(request.url()));
  page.on("pageerror", error => seen.errors.push(String(error)));
  page.on("console", message => { if (message.type() === "error") seen.errors.push(message.text()); });
  const response = await page.goto(BASE + "/playground");
  assert.equal(response.status(), 200);
  await until(page, () => document.body.dataset.state === "ready", null, "the first simulation");
  return { context, page, seen };
}

// Sets the controls (ids → values) and waits for the simulation they ask for.
async function setControls(page, values) {
  const seq = Number(await page.evaluate(() => document.body.dataset.seq));
  for (const [id, value] of Object.entries(values)) {
    if (id === "pattern" || id === "unit") await page.selectOption("#" + id, value);
    else await page.fill("#" + id, String(value));
  }
  // One simulation of all the values, whatever change events came before
  // (the page draws only its latest request).
  await page.evaluate(() => document.getElementById("rate").dispatchEvent(new Event("change")));
  await until(page, s => document.body.dataset.state !== "loading" && Number(document.body.dataset.seq) > s, seq,
              "a simulation");
  return page.evaluate(() => document.body.dataset.state);
}

// The dots of one lane: [{kind, i, t, ok, cy, blockedClass}].
function dots(page, lane) {
  return page.$$eval(`circle.dot[data-lane="${lane}"]`, nodes => nodes.map(n => ({
    kind: n.dataset.kind, i: Number(n.dataset.i), t: Number(n.dataset.t), ok: n.dataset.ok === "true",
    retryAfter: n.dataset.retryAfter === "" ? null : Number(n.dataset.retryAfter),
    cy: Number(n.getAttribute("cy")), blockedClass: n.classList.contains("blocked"),
  })));
}

function panelConfig(page, kind) {
  return page.getAttribute(`.panel[data-kind="${kind}"]`, "data-config").then(JSON.parse);
}

// The layout at this width: no horizontal scroll, nothing out of its panel,
// the panels side by side when `sideBySide`, else stacked.
async function checkLayout(page, viewport, sideBySide) {
  const layout = await page.evaluate(() => {
    const box = e => { const r = e.getBoundingClientRect(); return { left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width }; };
    const panels = Array.from(document.querySelectorAll(".panel"));
    return {
      scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
      panels: panels.map(box),
      outside: panels.flatMap(p => Array.from(p.querySelectorAll("svg, .legend, dl, p, code")).filter(e => {
        const r = e.getBoundingClientRect(), q = p.getBoundingClientRect();
        return r.left < q.left - 0.5 || r.right > q.right + 0.5;
      }).map(e => p.dataset.kind + ": " + e.tagName + "." + e.getAttribute("class"))),
      wider: Array.from(document.querySelectorAll("body *")).filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
        .map(e => e.tagName + "#" + e.id + "." + e.getAttribute("class")).slice(0, 5),
    };
  });
  assert.ok(layout.scrollWidth <= layout.innerWidth, `horizontal scroll: ${layout.scrollWidth} > ${layout.innerWidth}`);
  assert.deepEqual(layout.wider, [], "elements past the right edge");
  assert.deepEqual(layout.outside, [], "elements outside their panel");
  assert.equal(layout.panels.length, 3);
  if (sideBySide) {
    assert.ok(layout.panels.every(p => Math.abs(p.top - layout.panels[0].top) < 1), "the three panels side by side");
    assert.ok(layout.panels.every(p => p.top < viewport.height - 200), "the panels start above the fold");
  } else {
    assert.ok(layout.panels[0].bottom <= layout.panels[1].top && layout.panels[1].bottom <= layout.panels[2].top,
              "the panels stacked");
  }
  // The traffic menu shows its whole choice ("burst at a window's edge").
  const menu = await page.evaluate(() => {
    const select = document.getElementById("pattern"), span = document.createElement("span");
    span.style.font = getComputedStyle(select).font;
    span.style.whiteSpace = "nowrap";
    span.textContent = select.selectedOptions[0].text;
    document.body.appendChild(span);
    const text = span.getBoundingClientRect().width;
    span.remove();
    return { text, width: select.clientWidth, label: select.selectedOptions[0].text };
  });
  assert.equal(menu.label, "burst at a window's edge");
  assert.ok(menu.width >= menu.text + 24, `the traffic menu is ${menu.width}px for ${menu.text}px of text`);
}

// Screenshots: the viewport (for the README) and the full page, whose width
// must be the viewport's (anything wider would have scrolled sideways).
async function screenshots(page, viewport, name) {
  const shot = path.join(SHOTS, name + ".png"), full = path.join(SHOTS, name + "-full.png");
  await page.screenshot({ path: shot });
  await page.screenshot({ path: full, fullPage: true });
  console.log("playground screenshot: " + shot);
  assert.deepEqual(pngSize(shot), { width: viewport.width, height: viewport.height });
  const size = pngSize(full);
  assert.equal(size.width, viewport.width, "the full page is as wide as the viewport");
  assert.ok(size.height >= viewport.height && size.height < 8000, `full page height ${size.height}`);
}

// Hits from the keyboard: Enter and Space on the focused button, which keeps
// the focus; then three allowed and one blocked in each kind, and the
// database's ratelimit_check agrees that the limits are spent.
async function hitFromTheKeyboard(page) {
  assert.equal(await setControls(page, { rate: 3, period: 1, unit: "minutes", capacity: 3, start: 0, pattern: "edge" }),
               "ready");
  await page.focus("#hit");
  for (const key of ["Enter", "Space", "Enter", "Space"]) await page.keyboard.press(key);
  await until(page, () => Number(document.body.dataset.hits) === 4, null, "four hits");
  assert.equal(await page.evaluate(() => document.activeElement.id), "hit", "the focus stays on Hit");
  const hits = await dots(page, "hit");
  const answers = await page.evaluate(() => window.playground.hits);
  for (const kind of KINDS) {
    const mine = hits.filter(d => d.kind === kind).sort((a, b) => a.t - b.t);
    assert.deepEqual(mine.map(d => d.ok), [true, true, true, false], `${kind}: three allowed, then blocked`);
    assert.ok(mine[3].retryAfter > 0 && mine[3].blockedClass);
    const last = answers.filter(h => h.kind === kind && h.n === 4)[0];
    const [[ok]] = psql(`SELECT ok FROM ratelimit_check(${literal(last.limit)}, ${literal(last.key)}, ${literal(JSON.stringify(last.config))}::jsonb)`);
    assert.equal(ok, "f", `${kind}: ratelimit_check after the blocked hit`);
    // The kind's own headers, shown in its panel.
    const shown = await page.$$eval(`[data-headers-kind="${kind}"] dd`, dds => Object.fromEntries(dds.map(d => [d.dataset.header, d.textContent])));
    assert.deepEqual(shown, last.headers);
    assert.match(shown.RateLimit, new RegExp(`^"${last.limit}";r=0;t=\\d+$`));
    assert.match(shown["Retry-After"], /^[1-9]\d*$/);
  }
  // The HTTP answer's own headers: the three policies, the latest Retry-After.
  const response = await page.$$eval("#response-headers dd", dds => Object.fromEntries(dds.map(d => [d.dataset.header, d.textContent])));
  assert.match(response["RateLimit-Policy"], /^"playground-token-bucket";q=3;w=60, "playground-fixed-window";q=3;w=60, "playground-sliding-window";q=3;w=60$/);
  assert.equal(response["Retry-After"], String(Math.max(...answers.filter(h => h.n === 4).map(h => Number(h.headers["Retry-After"])))));
  assert.equal(response["X-RateLimit-Remaining"], "0");
  assert.match(await page.textContent("#hits-log"), /#4 .*blocked, retry_after/);
  return answers.filter(h => h.n === 4);
}

// ---- 1280 × 900: everything --------------------------------------------------

describe("at 1280×900", () => {
  const viewport = { width: 1280, height: 900 };
  let page, seen, context;
  before(async () => ({ page, seen, context } = await openPage(viewport, false)));
  after(async () => { if (context) await context.close(); });

  for (const pattern of ["steady", "edge", "random"]) {
    test(`the ${pattern} pattern: every dot is the database's answer, on one line`, async () => {
      assert.equal(await setControls(page, { rate: 4, period: 10, unit: "seconds", capacity: 4, start: 0, pattern, seed: 7 }), "ready");
      const sim = await page.evaluate(() => ({ origin: window.playground.simulation.origin,
                                               arrivals: window.playground.lastRequest.arrivals }));
      const all = await dots(page, "sim");
      let allowed = 0, blocked = 0;
      for (const kind of KINDS) {
        const config = await panelConfig(page, kind);
        assert.equal(config.kind, kind);
        assert.equal(config.rate, 4);
        assert.equal(config.period, "10 seconds", "the period in the unit typed");
        if (kind === "token bucket") assert.equal(config.capacity, 4);
        else assert.equal(config.start, "2026-01-01T00:00:00Z");
        const mine = all.filter(d => d.kind === kind).sort((a, b) => a.i - b.i);
        assert.deepEqual(mine.map(d => d.t), sim.arrivals, `${kind}: one dot per arrival, at its time`);
        const expected = simulateInDatabase(config, sim.origin, mine.map(d => d.t));
        assert.deepEqual(mine.map(d => d.ok), expected, `${kind}: the dots' verdicts are ratelimit_simulate's`);
        for (const d of mine) assert.equal(d.blockedClass, !d.ok, `${kind}: a blocked dot is drawn blocked`);
        assert.equal(new Set(mine.map(d => d.cy)).size, 1, `${kind}: the dots are on one line, not stacked`);
        allowed += expected.filter(ok => ok).length;
        blocked += expected.filter(ok => !ok).length;
      }
      assert.ok(allowed > 0 && blocked > 0, `allowed ${allowed}, blocked ${blocked}`);
    });
  }

  test("the layout: three panels side by side above the fold, nothing overflows", async () => {
    assert.equal(await setControls(page, { rate: 4, period: 10, unit: "seconds", capacity: 4, start: 0, pattern: "edge" }), "ready");
    await checkLayout(page, viewport, true);
  });

  test("a burst at a window's edge: the fixed window's double burst flagged, the bucket's refill not", async () => {
    const burst = kind => page.$eval(`.panel[data-kind="${kind}"]`, panel => {
      const rect = panel.querySelector("rect.burst");
      return rect ? { most: Number(rect.dataset.burst), tone: rect.getAttribute("class") } : { most: 0, tone: "" };
    });
    const fixed = await burst("fixed window"), bucket = await burst("token bucket"), sliding = await burst("sliding window");
    assert.equal(fixed.most, 8);
    assert.match(fixed.tone, /alarm/);
    assert.match(await page.textContent('.panel[data-kind="fixed window"] [data-burst-note]'), /double burst/);
    assert.ok(bucket.most < 8 && sliding.most < 8);
    if (bucket.most) {
      assert.match(bucket.tone, /normal/, "capacity plus refill is by design, not an alarm");
      assert.equal(await page.$eval('.panel[data-kind="token bucket"] [data-burst-note]', n => n.dataset.burstNote), "normal");
    }
    assert.ok(await page.locator('.panel[data-kind="fixed window"] line.edge').count() >= 3);
    assert.ok(await page.locator('.panel[data-kind="sliding window"] [data-series="weighted-previous"]').count() >= 1);
    // Each panel says what its algorithm trades.
    for (const kind of KINDS) assert.ok((await page.textContent(`.panel[data-kind="${kind}"] .tradeoff`)).length > 60);
  });

  test("the fixed window's reset is a drop to 0 at the edge, not a ramp", async () => {
    const { levels } = await page.evaluate(() => window.playground.simulation.algorithms[1]);
    const used = t => 4 - levels.find(l => l.t === t).remaining;
    // Full (the rate) just before the edge, empty at it: the whole height
    // in one vertical step.
    assert.equal(used(19999), 4);
    assert.equal(used(20000), 0);
    const drop = await page.$eval('.panel[data-kind="fixed window"] svg.chart', svg => {
      const edge = svg.querySelector('line.edge[data-edge="20000"]');
      const points = svg.querySelector('[data-series="used"]').getAttribute("points").trim().split(/\s+/)
        .map(p => p.split(",").map(Number));
      const x = Number(edge.getAttribute("x1"));
      for (let i = 1; i < points.length; i++) {
        const [x0, y0] = points[i - 1], [x1, y1] = points[i];
        if (Math.abs(x0 - x) < 1 && Math.abs(x1 - x) < 1 && y1 > y0) return y1 - y0;
      }
      return 0;
    });
    const expected = (used(19999) - used(20000)) / 4.4 * 74;  // the plot is 74 px high for 4.4
    assert.ok(Math.abs(drop - expected) < 0.5, `the drop at the edge: ${drop}px, not ${expected}px`);
  });

  test("the sliding window's picture is the extension's: floor(previous × weight) + current = rate − remaining", async () => {
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
      const crossing = Math.abs(exact - Math.round(exact)) < 1e-6;
      const difference = Math.abs(rate - remaining - estimate);
      assert.ok(difference < 1e-9 || (crossing && difference <= 1 + 1e-9),
                `at ${t} ms: rate − remaining = ${rate - remaining}, floor(${prev} × weight) + current = ${estimate}`);
    }
    assert.ok(weighted > 50, `probes that weigh a previous window: ${weighted}`);
  });

  test("the exact sliding window and the fixed window opening at the first request: the page's own, labelled", async () => {
    assert.equal(await setControls(page, { pattern: "random", seed: 3 }), "ready");
    const arrivals = await page.evaluate(() => window.playground.lastRequest.arrivals);
    const exact = (await dots(page, "exact")).sort((a, b) => a.i - b.i);
    assert.deepEqual(exact.map(d => d.ok), exactLog(arrivals, 4, 10000));
    const first = (await dots(page, "first-request")).sort((a, b) => a.i - b.i);
    assert.deepEqual(first.map(d => d.ok), windowAtFirstRequest(arrivals, 4, 10000));
    const approximated = (await dots(page, "sim")).filter(d => d.kind === "sliding window" && !d.ok).length;
    const limited = exact.filter(d => !d.ok).length;
    const compare = await page.textContent('[data-compare="sliding"]');
    assert.match(compare, new RegExp(`^Precise window: limited ${limited} · approximated \\(the extension\\): limited ${approximated} `));
    assert.match(compare, /computed by this page/);
    assert.match(await page.textContent('.panel[data-kind="fixed window"] .lane-title'), /computed by this page/);
  });

  test("periods in the unit typed, and a window start the user defines", async () => {
    assert.equal(await setControls(page, { rate: 2, period: 10, unit: "seconds", start: 5, pattern: "steady" }), "ready");
    const config = await panelConfig(page, "fixed window");
    assert.equal(config.period, "10 seconds");
    assert.equal(config.start, "2026-01-01T00:00:05Z");
    const edges = await page.$$eval('.panel[data-kind="fixed window"] svg.chart line.edge', l => l.map(e => Number(e.dataset.edge)));
    assert.deepEqual(edges, [5000, 15000, 25000]);
    const sim = await page.evaluate(() => ({ origin: window.playground.simulation.origin,
                                             arrivals: window.playground.lastRequest.arrivals }));
    for (const kind of ["fixed window", "sliding window"]) {
      const mine = (await dots(page, "sim")).filter(d => d.kind === kind).sort((a, b) => a.i - b.i);
      assert.deepEqual(mine.map(d => d.ok), simulateInDatabase(await panelConfig(page, kind), sim.origin, sim.arrivals));
    }
    assert.equal(await setControls(page, { period: 1, unit: "minutes", start: 0 }), "ready");
    assert.equal((await panelConfig(page, "token bucket")).period, "1 minute");
    assert.match(await page.textContent('.panel[data-kind="token bucket"] svg.chart'), /30 s|0\.5 min/);
    assert.match(await page.textContent('.panel[data-kind="token bucket"] .summary'), /within any 1 minute/);
  });

  test("errors in the words of the fields typed, never of a field the page computed", async () => {
    for (const [values, field, message] of [
      [{ period: "" }, "period", /^Period must be from 1 millisecond to 1 hour/],
      [{ period: 0 }, "period", /^Period must be/],
      [{ period: 2, unit: "hours" }, "period", /^Period must be/],
      [{ rate: 0, period: 10, unit: "seconds" }, "rate", /^Rate must be a number greater than 0/],
      [{ rate: 4, capacity: -1 }, "capacity", /^Capacity must be/],
    ]) {
      assert.equal(await setControls(page, values), "error");
      assert.match(await page.textContent(`#${field}-error`), message);
      assert.equal(await page.getAttribute(`#${field}`, "aria-invalid"), "true");
      assert.doesNotMatch(await page.innerText("body"), /span|field "/);
      assert.equal(await page.locator("circle.dot").count(), 0);
    }
    // An error the service names a field for is shown under that field.
    await page.route("**/playground/simulate", route => route.fulfill({ status: 400, contentType: "application/json",
      body: JSON.stringify({ error: 'field "capacity" must be a number from 0 to 1000', field: "capacity" }) }));
    assert.equal(await setControls(page, { capacity: 4 }), "error");
    assert.equal(await page.textContent("#capacity-error"), "Capacity must be a number from 0 to 1000.");
    await page.unroute("**/playground/simulate");
    // Chromium logs that answer's 400 to the console: the one error expected.
    const logged = seen.errors.findIndex(e => /status of 400/.test(e));
    assert.ok(logged >= 0, "the 400 answer was logged");
    seen.errors.splice(logged, 1);
    assert.equal(await setControls(page, { rate: 4, period: 10, capacity: 4 }), "ready");
    assert.equal(await page.textContent("#capacity-error"), "");
  });

  test("traffic cut at 2,000 requests is said so", async () => {
    assert.ok(await page.locator("#notice").isHidden());
    assert.equal(await setControls(page, { rate: 1000, pattern: "steady" }), "ready");
    assert.ok(await page.locator("#notice").isVisible());
    assert.match(await page.textContent("#notice"), /4,500 requests; the playground simulates the first 2,000/);
    assert.equal(await setControls(page, { rate: 4, pattern: "edge" }), "ready");
    assert.ok(await page.locator("#notice").isHidden());
  });

  test("every request's details from the keyboard; labelled charts and live regions", async () => {
    await page.focus("#inspect");
    for (let i = 0; i < 3; i++) await page.keyboard.press("ArrowRight");
    const calls = await page.evaluate(() => window.playground.simulation.algorithms.map(a => a.calls[3]));
    for (const [k, kind] of KINDS.entries()) {
      const details = await page.textContent(`[data-details="${kind}"]`);
      assert.match(details, new RegExp(`^Request 4 of \\d+ at .*: ${calls[k].ok ? "allowed" : "blocked, retry_after"}`));
      assert.equal(await page.getAttribute(`circle.dot[data-lane="sim"][data-kind="${kind}"][data-i="3"]`, "class"),
                   `dot ${calls[k].ok ? "allowed" : "blocked"} selected`);
    }
    assert.match(await page.getAttribute("#inspect", "aria-valuetext"), /^Request 4 of \d+ at .*: token bucket (allowed|blocked), fixed window/);
    const labels = await page.$$eval(".panel svg:not([aria-hidden])", svgs => svgs.map(s => [s.getAttribute("role"), s.getAttribute("aria-label")]));
    assert.equal(labels.length, 8, "per panel its timeline and its hits; the page's two lanes");
    for (const [role, label] of labels) { assert.equal(role, "img"); assert.ok(label && label.length > 20, label); }
    assert.equal(await page.getAttribute("#status", "role"), "status");
    assert.equal(await page.getAttribute("#status", "aria-live"), "polite");
    assert.equal(await page.getAttribute("#notice", "role"), "status");
    assert.equal(await page.getAttribute("#hits-log", "role"), "log");
  });

  test("Hit from the keyboard, through the real limits, with their headers", async () => {
    await hitFromTheKeyboard(page);
    await checkLayout(page, viewport, true);
    await screenshots(page, viewport, "playground-1280");
  });

  test("a moving now: the countdowns to retry_after, the bucket refilling, the windows rolling", async () => {
    const blocked = await page.evaluate(() => window.playground.hits.filter(h => h.n === 4));
    // The clock stops here; from now on only the test moves it.
    await page.clock.pauseAt(await page.evaluate(() => Date.now()) + 1000);
    const read = () => page.evaluate(() => {
      tick();
      const out = {};
      for (const box of document.querySelectorAll("[data-countdown]")) out[box.dataset.countdown] = {
        left: Number(box.dataset.remainingMs), text: box.textContent,
        now: Number(document.querySelector(`[data-now="${box.dataset.countdown}"]`).dataset.t),
        x: Number(document.querySelector(`[data-now="${box.dataset.countdown}"]`).getAttribute("x1")),
      };
      return out;
    });
    const first = await read();
    await page.clock.runFor(5000);
    const later = await read();
    const view = await page.evaluate(() => window.playground.view);
    const width = await page.$eval('svg.hits-chart[data-kind="token bucket"]', s => s.viewBox.baseVal.width);
    for (const kind of KINDS) {
      assert.ok(Math.abs(later[kind].now - first[kind].now - 5000) < 1e-6, `${kind}: now moved 5 s`);
      assert.ok(Math.abs(later[kind].left - (first[kind].left - 5000)) < 1e-6, `${kind}: the countdown went down 5 s`);
      assert.ok(Math.abs(later[kind].x - first[kind].x - 5000 / (view.to - view.from) * (width - 16)) < 0.01,
                `${kind}: the now line moved 5 s to the right`);
      assert.match(later[kind].text, /^Blocked: retry in \d+\.\d s/);
    }
    // After the hits, ratelimit_simulate's level: the bucket refills to its
    // capacity, the fixed window's count drops to 0 at the next edge. The
    // replay gives your hits the verdicts the real limits gave.
    const replay = await page.evaluate(() => window.playground.replay.algorithms);
    for (const [k, kind] of KINDS.entries()) {
      const real = (await page.evaluate(() => window.playground.hits)).filter(h => h.kind === kind).map(h => h.ok);
      assert.deepEqual(replay[k].calls.map(c => c.ok), real, `${kind}: the replay's verdicts`);
    }
    assert.equal(await page.evaluate(() => window.playground.replayMismatches), 0);
    const lastHit = Math.max(...blocked.map(h => h.t));
    const bucket = replay[0].levels.filter(l => l.t > lastHit);
    assert.ok(bucket.length > 10 && bucket[bucket.length - 1].remaining === 3 && bucket[0].remaining < 1,
              `the bucket after the hits: ${JSON.stringify(bucket.slice(0, 3))} … ${JSON.stringify(bucket.slice(-1))}`);
    const edge = 60000 * Math.ceil(lastHit / 60000);
    const fixed = Object.fromEntries(replay[1].levels.map(l => [l.t, l.remaining]));
    assert.deepEqual([fixed[edge - 1], fixed[edge]], [0, 3], "the fixed window rolls over at its edge");
    assert.ok(await page.locator('svg.hits-chart [data-series="replay-level"]').count() === 1);
    // The countdowns reach zero; the page says so.
    const longest = Math.max(...KINDS.map(k => later[k].left));
    await page.clock.runFor(Math.ceil(longest) + 400);
    const done = await read();
    for (const kind of KINDS) assert.equal(done[kind].text, "You may retry now.", kind);
    assert.match(await page.textContent("#status"), /you may retry now/);
    await page.clock.resume();
  });

  test("the page asked for nothing but the service's own URLs, and logged no error", () => {
    assert.ok(seen.requests.length >= 3, `requests: ${seen.requests.length}`);
    for (const url of seen.requests) assert.ok(url.startsWith(BASE + "/"), `a request outside the service: ${url}`);
    assert.deepEqual(seen.errors, []);
  });
});

// ---- 390 × 844, touch: the phone ------------------------------------------------

describe("at 390×844 with touch", () => {
  const viewport = { width: 390, height: 844 };
  let page, seen, context;
  before(async () => ({ page, seen, context } = await openPage(viewport, true)));
  after(async () => { if (context) await context.close(); });

  test("the layout: panels stacked, charts as wide as the screen, no horizontal scroll", async () => {
    await checkLayout(page, viewport, false);
    const widths = await page.$$eval(".panel svg.chart", svgs => svgs.map(s => s.getBoundingClientRect().width));
    assert.ok(widths.every(w => w > 300 && w <= 390), `chart widths ${widths}`);
  });

  test("a tap on a dot shows its details", async () => {
    const target = await page.$eval('.panel[data-kind="fixed window"] circle.dot[data-lane="sim"][data-i="5"]', d => {
      d.scrollIntoView({ block: "center" });
      const r = d.getBoundingClientRect();
      return { x: r.left + r.width / 2, y: r.top + r.height / 2, t: Number(d.dataset.t) };
    });
    await page.touchscreen.tap(target.x, target.y);
    const selected = await page.evaluate(() => window.playground.selected);
    const t = await page.evaluate(i => window.playground.simulation.algorithms[1].calls[i].t, selected);
    // The nearest dot to the tap: the one tapped, or one at the same place.
    assert.ok(Math.abs(t - target.t) < 100, `tapped the dot at ${target.t} ms, selected ${t} ms`);
    assert.match(await page.textContent('[data-details="fixed window"]'), new RegExp(`^Request ${selected + 1} of `));
  });

  test("Hit from the keyboard, through the real limits, with their headers", async () => {
    await hitFromTheKeyboard(page);
    await checkLayout(page, viewport, false);
    await page.evaluate(() => document.querySelector(".panel").scrollIntoView());
    await screenshots(page, viewport, "playground-390");
  });

  test("the page asked for nothing but the service's own URLs, and logged no error", () => {
    for (const url of seen.requests) assert.ok(url.startsWith(BASE + "/"), `a request outside the service: ${url}`);
    assert.deepEqual(seen.errors, []);
  });
});
