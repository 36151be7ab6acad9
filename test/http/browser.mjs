// Headless Chromium for the dashboard's tests, on a fresh profile directory
// per run (Playwright passes it as --user-data-dir); `options` adds context
// options.  The caller closes the browser and removes `profile`.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

export async function launch(options = {}) {
  const profile = mkdtempSync(join(tmpdir(), 'bgexec-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    ...options,
  });
  return { browser, profile };
}
