// Records a hash of the extension's sources next to the built bundle, so a test can tell
// when the committed bundle is older than the sources (tests/labextension/test_bundle.py
// computes the same hash: sorted paths, each as "path\0content\0").
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

const files = [
  'package.json',
  'tsconfig.json',
  ...readdirSync('src').map(f => `src/${f}`),
  ...readdirSync('style').map(f => `style/${f}`),
  ...readdirSync('schema').map(f => `schema/${f}`)
].sort();
const hash = createHash('sha256');
for (const file of files) {
  hash.update(`${file}\0`);
  hash.update(readFileSync(file));
  hash.update('\0');
}
writeFileSync('kbsql_labextension/labextension/source-hash.txt', `${hash.digest('hex')}\n`);
