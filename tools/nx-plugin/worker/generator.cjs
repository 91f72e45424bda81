// `npx nx g ./tools/nx-plugin:worker <name>`: the files of `queen new worker
// <name>`, written through nx's tree (so --dry-run shows them and nothing is
// half-written on an error). The template is @queen-mq/cli's, one copy.
module.exports = async function workerGenerator(tree, options) {
  let cli;
  try {
    cli = await import('@queen-mq/cli/new-worker');
  } catch (err) {
    throw new Error(`the worker template comes from @queen-mq/cli, which did not load (${err.message}): run "npm ci && npm run build" at the repository root first`);
  }
  const files = cli.workerFiles(options.name);
  const dir = `${cli.WORKER_PARENT}/${options.name}`;
  if (tree.exists(dir)) throw new Error(`${dir} exists already; nothing written`);
  for (const f of files) tree.write(f.path, f.content);
  return () => process.stdout.write(`\n${cli.workerNextSteps(options.name)}`);
};
