// bench_js_tiktoken.mjs: encoding speed of js-tiktoken's gpt2 encoding, the baseline for `./tokenize bench`.
//
//   mkdir -p /tmp/jstt && (cd /tmp/jstt && npm init -y && npm i js-tiktoken)   # outside the repo
//   JS_TIKTOKEN=/tmp/jstt/node_modules/js-tiktoken node scripts/bench_js_tiktoken.mjs FILE
//
// Reads FILE as UTF-8, encodes it once to warm up the JIT, then repeatedly (at least 1 s, at most 20 runs) and
// prints the token count and MB/s (1 MB = 10^6 bytes of the file), figure last. js-tiktoken is single-threaded.
// Compare with: ./tokenize bench --vocab DIR FILE
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const file = process.argv[2];
if (!file) {
    console.error("usage: node scripts/bench_js_tiktoken.mjs FILE");
    process.exit(1);
}
const require = createRequire(import.meta.url);
const pkgDir = process.env.JS_TIKTOKEN || "/tmp/jstt/node_modules/js-tiktoken";
let Tiktoken, gpt2;
try {
    ({ Tiktoken } = require(path.join(pkgDir, "dist/index.cjs")));
    gpt2 = require(path.join(pkgDir, "dist/ranks/gpt2.cjs"));
} catch (err) {
    console.error(`error: cannot load js-tiktoken from '${pkgDir}' (set JS_TIKTOKEN): ${err.message}`);
    process.exit(1);
}
let bytes;
try {
    bytes = fs.readFileSync(file);
} catch (err) {
    console.error(`error: cannot read '${file}': ${err.message}`);
    process.exit(1);
}
const text = bytes.toString("utf8");
const enc = new Tiktoken(gpt2);
const ntok = enc.encode(text, [], []).length; // warm-up; special tokens are ordinary text, as in ./tokenize
let runs = 0;
const t0 = process.hrtime.bigint();
let elapsed = 0;
while (runs < 1 || (elapsed < 1.0 && runs < 20)) {
    enc.encode(text, [], []);
    runs++;
    elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
}
const mbs = (bytes.length * runs) / elapsed / 1e6;
console.log(`js-tiktoken ${file}: ${bytes.length} bytes, ${ntok} tokens, ${runs} runs, ${(elapsed / runs).toFixed(3)} s/run`);
console.log(`js-tiktoken encode MB/s (1 thread): ${mbs.toFixed(2)}`);
