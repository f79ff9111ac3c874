// lib/proto.js — where the API's .proto files are and the service
// constructor loaded from them (@grpc/proto-loader at runtime, no generated
// code). The packed package carries proto/ (scripts/copy-proto.js); a
// checkout uses the repository's proto/.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const FILE = path.join('sandgate', 'v1', 'sandgate.proto');
let cached = null;

function protoRoot() {
  for (const d of [path.join(__dirname, '..', 'proto'), path.join(__dirname, '..', '..', '..', 'proto')]) {
    if (fs.existsSync(path.join(d, FILE))) return d;
  }
  throw new Error('@sandgate/client: proto/sandgate/v1/sandgate.proto not found (a broken package?)');
}

/** The sandgate.v1.Sandboxes client constructor. Fields keep their proto
 * names (snake_case); int64 as Number (ms timestamps fit); enums as names. */
function service() {
  if (cached) return cached;
  const def = protoLoader.loadSync(FILE, {
    includeDirs: [protoRoot()], keepCase: true, longs: Number, enums: String, defaults: true,
    oneofs: true,
  });
  cached = grpc.loadPackageDefinition(def).sandgate.v1.Sandboxes;
  return cached;
}

module.exports = { service };
