// Opens a `xun serve` page in Debian's headless Chromium (driven by playwright-core, which never
// downloads a browser) and reads the screen the page shows: the text of xterm.js's buffer, the very
// cells its renderer paints on the canvas.
//
//   node read_screen.mjs URL USER_DATA_DIR SCREENSHOT TEXT...
//
// Prints one JSON line when every TEXT is on the screen (or the time is up):
//   {"event": "screen", "found": bool, "missing": [...], "lines": [...], "cols": n, "rows": n, "shown": bool}
// Then it reads its standard input, one JSON object a line: {"type": TEXT, "wait": TEXT2} types TEXT
// and Enter into the page (real key events, as a person would) and prints
//   {"event": "typed", "found": bool, "lines": [...]}
// once TEXT2 is on the screen (or after 20 s). {"goto": URL2} leaves the page as a link on it would
// (`location.assign`, in the same tab and profile) and prints {"event": "went", "url": ...} once URL2 has
// loaded; with "expect": [TEXT...] it then waits for those on the screen and prints the screen too.
// {"state": true} prints {"event": "state", "url": ..., "cookies": [every cookie of the profile],
// "session": {the page's sessionStorage}}. When its standard input closes it watches the page for
// textual-serve's "Session ended" (up to 15 s), prints {"event": "closed", "closed": bool, "lines": [...]}
// and quits the browser.
//
// How the buffer is reached: textual-serve's page keeps its xterm.js Terminal in a closure, so an init
// script (run before the page's own scripts) puts a setter for `_addonManager` on Object.prototype. The
// public Terminal's constructor assigns that property once (`this._addonManager = ...`); the setter
// stores the new Terminal in `window.__xunTerminals` and turns itself into a plain own property. The
// page's code is not changed.

import { createInterface } from 'node:readline';

import { chromium } from 'playwright-core';

const [url, userDataDir, screenshot, ...expected] = process.argv.slice(2);
const CHROMIUM = process.env.XUN_CHROMIUM || '/usr/bin/chromium';
const SCREEN_TIMEOUT_MS = 25000;
const TYPED_TIMEOUT_MS = 20000;
const CLOSED_TIMEOUT_MS = 15000;

function emit(value) {
  process.stdout.write(JSON.stringify(value) + '\n');
}

function captureTerminals() {
  window.__xunTerminals = [];
  Object.defineProperty(Object.prototype, '_addonManager', {
    configurable: true,
    get() { return undefined; },
    set(value) {
      Object.defineProperty(this, '_addonManager', { value, writable: true, configurable: true, enumerable: true });
      if (this && this.buffer && typeof this.write === 'function') window.__xunTerminals.push(this);
    },
  });
}

function readScreen() {
  const terminal = (window.__xunTerminals || [])[0];
  const element = document.querySelector('#terminal');
  const box = element ? element.getBoundingClientRect() : { width: 0, height: 0 };
  const shown = document.body.classList.contains('-first-byte') && box.width > 0 && box.height > 0;
  const closed = document.body.classList.contains('-closed');
  if (!terminal) return { lines: [], cols: 0, rows: 0, shown, closed };
  const buffer = terminal.buffer.active;
  const lines = [];
  for (let y = 0; y < terminal.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    lines.push(line ? line.translateToString(true) : '');
  }
  return { lines, cols: terminal.cols, rows: terminal.rows, shown, closed };
}

async function waitFor(page, texts, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let screen = await page.evaluate(readScreen);
  let missing = texts.filter((item) => !screen.lines.join('\n').includes(item));
  while ((!screen.shown || missing.length > 0) && Date.now() < deadline) {
    await page.waitForTimeout(200);
    screen = await page.evaluate(readScreen);
    missing = texts.filter((item) => !screen.lines.join('\n').includes(item));
  }
  return { found: screen.shown && missing.length === 0, missing, ...screen };
}

const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: CHROMIUM,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1400, height: 900 },
  timeout: 20000,
});
try {
  const page = context.pages()[0] || await context.newPage();
  page.on('pageerror', (error) => process.stderr.write(`page error: ${error}\n`));
  page.on('console', (message) => process.stderr.write(`page console: ${message.text()}\n`));
  await page.addInitScript(captureTerminals);
  const origins = new Set([new URL(url).origin]);  // nothing from outside (the page asks for a web font)
  await context.route('**/*', (route) => (origins.has(new URL(route.request().url()).origin) ? route.continue() : route.abort()));
  await page.goto(url, { waitUntil: 'load', timeout: 15000 });

  const screen = await waitFor(page, expected, SCREEN_TIMEOUT_MS);
  await page.screenshot({ path: screenshot });
  emit({ event: 'screen', ...screen });

  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const command = JSON.parse(line);
    if (command.goto) {
      origins.add(new URL(command.goto).origin);
      await page.evaluate((address) => { setTimeout(() => window.location.assign(address), 0); }, command.goto);
      await page.waitForURL(command.goto, { waitUntil: 'load', timeout: 15000 });
      const screen = command.expect ? await waitFor(page, command.expect, SCREEN_TIMEOUT_MS) : {};
      emit({ event: 'went', ...screen, url: page.url() });
      continue;
    }
    if (command.state) {
      const session = await page.evaluate(() => Object.fromEntries(Object.entries(window.sessionStorage)));
      emit({ event: 'state', url: page.url(), cookies: await context.cookies(), session });
      continue;
    }
    await page.focus('.xterm-helper-textarea');  // where xterm.js takes the keyboard
    await page.keyboard.type(command.type, { delay: 20 });
    await page.keyboard.press('Enter');
    emit({ event: 'typed', ...(await waitFor(page, [command.wait], TYPED_TIMEOUT_MS)) });
  }
  const until = Date.now() + CLOSED_TIMEOUT_MS;
  let after = await page.evaluate(readScreen);
  while (!after.closed && Date.now() < until) {
    await page.waitForTimeout(200);
    after = await page.evaluate(readScreen);
  }
  emit({ event: 'closed', closed: after.closed, lines: after.lines });
} finally {
  await context.close();
}
