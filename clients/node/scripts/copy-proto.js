#!/usr/bin/env node
// clients/node/scripts/copy-proto.js — npm's prepack hook: copy the API's
// .proto files from the repository (../../proto) into the package's proto/,
// so a packed @sandgate/client loads them from itself. proto/ is not
// committed; lib/proto.js falls back to ../../proto in a checkout.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const here = path.resolve(__dirname, '..');
const src = path.resolve(here, '..', '..', 'proto', 'sandgate', 'v1');
const dst = path.join(here, 'proto', 'sandgate', 'v1');
fs.mkdirSync(dst, { recursive: true });
for (const f of ['sandgate.proto', 'errors.proto']) {
  fs.copyFileSync(path.join(src, f), path.join(dst, f));
}
