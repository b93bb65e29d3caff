// Peer side of Cordon's computer-use benchmark, driven by
// `cargo bench -p cordon-computer --bench step`, which serves the page and passes its URL.
// Runs on the same page with the same Debian chromium:
//   playwright      raw playwright-core: page.mouse.click + full-size JPEG q80 screenshot
//   session         playwright-core: new context + page + goto + first JPEG screenshot
//   mcp             @playwright/mcp --caps=vision, default settings, over stdio:
//                   browser_mouse_click_xy + browser_take_screenshot (jpeg)
// Prints one JSON line per measurement: {"peer", "what", "n", "p50", "p99"} (milliseconds).
//
// Usage: node browser.mjs URL [N] [which,...]   (env CORDON_CHROMIUM overrides the binary)

import { chromium } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const [url, nArg, whichArg] = process.argv.slice(2);
if (!url) {
  console.error('usage: node browser.mjs URL [N] [playwright,session,mcp]');
  process.exit(2);
}
const n = Number(nArg || 200);
const which = new Set((whichArg || 'playwright,session,mcp').split(','));
const executablePath = process.env.CORDON_CHROMIUM || '/usr/lib/chromium/chromium';
const root = process.getuid && process.getuid() === 0;
// The same flags Cordon launches with (FIELD-NOTES), so the browsers are comparable.
const args = ['--disable-gpu', '--disable-smooth-scrolling', '--no-default-browser-check', '--disable-extensions'];
if (root) args.push('--no-sandbox');
// Button centre of the bench page, in CSS px.
const X = 640, Y = 400;

const pct = (v, p) => {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.round((s.length - 1) * p)];
};
const report = (peer, what, v) =>
  console.log(JSON.stringify({ peer, what, n: v.length, p50: pct(v, 0.5), p99: pct(v, 0.99) }));
const now = () => performance.now();

async function playwright() {
  const browser = await chromium.launch({ executablePath, headless: true, args });
  try {
    if (which.has('playwright')) {
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
      const page = await context.newPage();
      await page.goto(url);
      const step = async () => {
        await page.mouse.click(X, Y);
        return page.screenshot({ type: 'jpeg', quality: 80 });
      };
      for (let i = 0; i < 10; i++) await step();
      const times = [];
      for (let i = 0; i < n; i++) {
        const t = now();
        await step();
        times.push(now() - t);
      }
      report('playwright-core', 'click + screenshot (jpeg q80, 1280x800 full size)', times);
      await context.close();
    }
    if (which.has('session')) {
      const times = [];
      for (let i = 0; i < 20; i++) {
        const t = now();
        const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
        const page = await context.newPage();
        await page.goto(url);
        await page.screenshot({ type: 'jpeg', quality: 80 });
        times.push(now() - t);
        await context.close();
      }
      report('playwright-core', 'new session (context + page + load + first screenshot)', times);
    }
  } finally {
    await browser.close();
  }
}

async function mcp() {
  const out = mkdtempSync(join(tmpdir(), 'cordon-pwmcp-'));
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [
      join(here, 'node_modules/@playwright/mcp/cli.js'),
      '--headless', '--caps=vision', '--isolated',
      '--executable-path', executablePath,
      '--viewport-size', '1280x800',
      '--output-dir', out,
      ...(root ? ['--no-sandbox'] : []),
    ],
    stderr: 'ignore',
  });
  const client = new Client({ name: 'cordon-bench', version: '0' });
  await client.connect(transport);
  try {
    const call = async (name, a) => {
      const r = await client.callTool({ name, arguments: a });
      if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content).slice(0, 300)}`);
      return r;
    };
    await call('browser_navigate', { url });
    const step = async () => {
      await call('browser_mouse_click_xy', { x: X, y: Y });
      const r = await call('browser_take_screenshot', { type: 'jpeg' });
      if (!r.content.some((c) => c.type === 'image')) throw new Error('no image in screenshot result');
    };
    for (let i = 0; i < 3; i++) await step();
    const times = [];
    // It waits for the page to settle after every action: fewer samples keep the run short.
    const m = Math.max(10, Math.min(n, 40));
    for (let i = 0; i < m; i++) {
      const t = now();
      await step();
      times.push(now() - t);
    }
    report('@playwright/mcp --caps=vision', 'click + screenshot (defaults)', times);
  } finally {
    await client.close();
    rmSync(out, { recursive: true, force: true });
  }
}

if (which.has('playwright') || which.has('session')) await playwright();
if (which.has('mcp')) await mcp();
