#!/usr/bin/env node
// The `queen` executable. It lives outside dist/ so that `npm ci` in a fresh
// clone links it into node_modules/.bin before anything is built (npm skips a
// bin whose file does not exist yet, and `npx queen` would then fetch an
// unrelated package from the registry).
let cli;
try {
  cli = await import('../dist/index.js');
} catch (err) {
  if (err && err.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('/cli/dist/')) {
    process.stderr.write('queen: @queen-mq/cli is not built yet: run "npm run build" at the repository root\n');
    process.exit(1);
  }
  throw err;
}
process.exit(await cli.main(process.argv.slice(2), cli.processIO()));
