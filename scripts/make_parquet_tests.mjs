// scripts/make_parquet_tests.mjs: writes the parquet test files of tests/data/ with three independent writers, and
// the output parquet_text must give for each, computed here from the values written (not by reading the files):
//   tests/data/parquet/*.parquet        the reader's cases (codecs, encodings, page versions, nulls, refusals)
//   tests/data/parquet/expected.txt     per file: "FILE VALUES SHA256" of the NUL-terminated non-null values (NULs
//                                       inside a value dropped), or "FILE refuse WORD" (the error must name WORD)
//   tests/data/fineweb/000_00000.parquet, 001_00000.parquet   the FineWeb stand-in of the dry runs: FineWeb's schema,
//                                       snappy, dictionary-encoded, data page v1, the text of data/tinyshakespeare.txt
//                                       cut into paragraphs (one paragraph per document)
//   fuzz/corpus/parquet/*.parquet      seeds of the fuzz target fuzz/parquet.c (a few rows each)
//   tests/data/tinystories/TinyStoriesV2-GPT4-{train,valid}.txt   the TinyStories stand-in: more paragraphs, in that
//                                       dataset's format (each story followed by a line "<|endoftext|>")
// The writers are npm packages installed outside the repository (not committed); run from that folder:
//   mkdir -p /tmp/pq && cd /tmp/pq && npm init -y && npm install @duckdb/node-api@1.5.6-r.1 @dsnp/parquetjs@1.8.8 hyparquet-writer@0.17.0
//   node /path/to/repo/scripts/make_parquet_tests.mjs
// The output is deterministic for these versions (no clocks, no randomness).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const req = createRequire(path.join(process.cwd(), 'noop.js'));
const load = async (name) => import(pathToFileURL(req.resolve(name)).href);
const { DuckDBInstance } = await load('@duckdb/node-api');
const parquetjs = (await load('@dsnp/parquetjs')).default ?? (await load('@dsnp/parquetjs'));
const { parquetWriteFile } = await load('hyparquet-writer');

const PQ = path.join(REPO, 'tests/data/parquet');
const FW = path.join(REPO, 'tests/data/fineweb');
fs.mkdirSync(PQ, { recursive: true });
fs.mkdirSync(FW, { recursive: true });
const manifest = [];

// what parquet_text prints for these values
function expected(values) {
    const h = createHash('sha256');
    let n = 0;
    for (const v of values) {
        if (v === null) continue;
        h.update(Buffer.from(v.replace(/\0/g, ''), 'utf8'));
        h.update(Buffer.from([0]));
        n++;
    }
    return `${n} ${h.digest('hex')}`;
}
const record = (dir, name, values) => manifest.push(`${path.relative(REPO, path.join(dir, name))} ${expected(values)}`);

// --- the values ------------------------------------------------------------------------------------------------
const shakespeare = fs.readFileSync(path.join(REPO, 'data/tinyshakespeare.txt'), 'utf8');
const paragraphs = shakespeare.split(/\n\n+/).map((p) => p.trim()).filter((p) => p.length > 0);
const special = [
    '', // an empty document
    'caf\u00e9 na\u00efve \u65e5\u672c\u8a9e \u0645\u0631\u062d\u0628\u0627 \u{1F600} \u00df\u2013\u00bd', // non-ASCII UTF-8, 2-4 bytes
    'before\u0000after\u0000', // NUL bytes inside a value (dropped by parquet_text)
    paragraphs.slice(0, 40).join('\n\n'), // a long value (snappy copies with 2-byte offsets)
];
// n rows cycling over a few distinct values (dictionary-friendly), every `nullEvery`-th row null
function fewDistinct(n, nullEvery) {
    const pool = [...special, ...paragraphs.slice(100, 110)];
    return Array.from({ length: n }, (_, i) => (nullEvery && i % nullEvery === 3 ? null : pool[(i * 5) % pool.length]));
}
// n unique rows (PLAIN writers keep them PLAIN), every `nullEvery`-th row null
function unique(n, nullEvery, from = 200) {
    return Array.from({ length: n }, (_, i) =>
        nullEvery && i % nullEvery === 5 ? null : i < special.length ? special[i] : `${i}: ${paragraphs[from + (i % 500)]}`);
}

// --- DuckDB: data page v1, PLAIN_DICTIONARY or PLAIN, snappy / gzip / uncompressed / zstd, row groups of 2048 --------
const duck = await (await DuckDBInstance.create(':memory:')).connect();
const sqlString = (s) => (s === null ? 'NULL' : `'${s.replace(/'/g, "''")}'`);
async function duckTable(name, cols, rows) { // rows: arrays of JS values; cols: "name TYPE"
    await duck.run(`CREATE OR REPLACE TABLE ${name} (${cols.join(', ')})`);
    for (let i = 0; i < rows.length; i += 500) {
        const chunk = rows.slice(i, i + 500).map((r) => `(${r.map((v) => (typeof v === 'string' || v === null ? sqlString(v) : String(v))).join(', ')})`);
        await duck.run(`INSERT INTO ${name} VALUES ${chunk.join(', ')}`);
    }
}
// NUL bytes cannot pass through SQL literals: those values are rebuilt with chr(0)
async function duckFixNul(table) {
    await duck.run(`UPDATE ${table} SET text = replace(text, '<NUL>', chr(0)) WHERE text LIKE '%<NUL>%'`);
}
const forSql = (v) => (v === null ? null : v.replace(/\0/g, '<NUL>'));
async function duckCopy(table, file, opts) {
    await duck.run(`COPY (SELECT * FROM ${table} ORDER BY rowid) TO '${file}' (FORMAT parquet, ${opts})`);
}
const DICT = 'DICTIONARY_COMPRESSION_RATIO_THRESHOLD 0, DICTIONARY_SIZE_LIMIT 1000000, STRING_DICTIONARY_PAGE_SIZE_LIMIT 1000000';

{ // snappy + dictionary, FineWeb-like schema, 3 row groups, nulls, NULs, UTF-8
    const text = fewDistinct(5000, 11);
    await duckTable('t1', ['text VARCHAR', 'id VARCHAR', 'dump VARCHAR', 'language VARCHAR', 'language_score DOUBLE', 'token_count BIGINT'],
        text.map((t, i) => [forSql(t), `<urn:uuid:${i}>`, 'CC-MAIN-2013-20', 'en', 0.9, i % 300]));
    await duckFixNul('t1');
    await duckCopy('t1', path.join(PQ, 'dict_snappy.parquet'), `COMPRESSION snappy, PARQUET_VERSION V1, ROW_GROUP_SIZE 2048, ${DICT}`);
    record(PQ, 'dict_snappy.parquet', text);
    // the same values under gzip, and under zstd (refused)
    const small = text.slice(0, 2500);
    await duck.run('CREATE OR REPLACE TABLE t2 AS SELECT * FROM t1 ORDER BY rowid LIMIT 2500');
    await duckCopy('t2', path.join(PQ, 'dict_gzip.parquet'), `COMPRESSION gzip, PARQUET_VERSION V1, ${DICT}`);
    record(PQ, 'dict_gzip.parquet', small);
    await duck.run('CREATE OR REPLACE TABLE t3 AS SELECT * FROM t1 ORDER BY rowid LIMIT 50');
    await duckCopy('t3', path.join(PQ, 'refuse_zstd.parquet'), 'COMPRESSION zstd, PARQUET_VERSION V1');
    manifest.push('tests/data/parquet/refuse_zstd.parquet refuse ZSTD');
}
{ // PLAIN, uncompressed; and DELTA_LENGTH_BYTE_ARRAY (PARQUET_VERSION V2, refused)
    const text = unique(300, 13);
    await duckTable('t4', ['text VARCHAR', 'n BIGINT'], text.map((t, i) => [forSql(t), i]));
    await duckFixNul('t4');
    await duckCopy('t4', path.join(PQ, 'plain_uncompressed.parquet'), 'COMPRESSION uncompressed, PARQUET_VERSION V1');
    record(PQ, 'plain_uncompressed.parquet', text);
    await duck.run('CREATE OR REPLACE TABLE t5 AS SELECT * FROM t4 ORDER BY rowid LIMIT 40');
    await duckCopy('t5', path.join(PQ, 'refuse_delta.parquet'), 'COMPRESSION snappy, PARQUET_VERSION V2');
    manifest.push('tests/data/parquet/refuse_delta.parquet refuse DELTA');
}

// --- parquetjs: PLAIN, data page v1 or v2, many pages (40 rows each) and row groups (150 rows) --------------------
async function pqjs(file, text, { v2, optional, codec }) {
    const schema = new parquetjs.ParquetSchema({
        text: { type: 'UTF8', optional, compression: codec },
        n: { type: 'INT64', compression: codec },
    });
    const w = await parquetjs.ParquetWriter.openFile(schema, file, { useDataPageV2: v2, pageSize: 40, rowGroupSize: 150 });
    for (let i = 0; i < text.length; i++) await w.appendRow(text[i] === null ? { n: i } : { text: text[i], n: i });
    await w.close();
}
{
    const text = unique(400, 9, 300);
    await pqjs(path.join(PQ, 'v1_pages_snappy.parquet'), text, { v2: false, optional: true, codec: 'SNAPPY' });
    record(PQ, 'v1_pages_snappy.parquet', text);
    const req2 = unique(400, 0, 700);
    await pqjs(path.join(PQ, 'v2_required_gzip.parquet'), req2, { v2: true, optional: false, codec: 'GZIP' });
    record(PQ, 'v2_required_gzip.parquet', req2);
}

// --- hyparquet-writer: data page v2, RLE_DICTIONARY, nulls, small pages and row groups -----------------------------
{
    const text = fewDistinct(900, 5);
    parquetWriteFile({
        filename: path.join(PQ, 'v2_dict_nulls.parquet'),
        columnData: [
            { name: 'id', data: text.map((_, i) => `id-${i}`), type: 'STRING' },
            { name: 'text', data: text, type: 'STRING' },
        ],
        pageSize: 300,
        rowGroupSize: 400,
        statistics: false,
    });
    record(PQ, 'v2_dict_nulls.parquet', text);
}

// --- hyparquet-writer: runs of 8 or more nulls and of values, which its definition levels hold as RLE runs (not
// bit-packed groups, as the isolated nulls above); uncompressed v2 pages
{
    const text = fewDistinct(600, 0).map((v, i) => ((i % 50 >= 20 && i % 50 < 32) || i >= 585 ? null : v));
    parquetWriteFile({
        filename: path.join(PQ, 'v2_null_runs.parquet'),
        columnData: [{ name: 'text', data: text, type: 'STRING' }],
        codec: 'UNCOMPRESSED',
        pageSize: 300,
        rowGroupSize: 400,
        statistics: false,
    });
    record(PQ, 'v2_null_runs.parquet', text);
}

// --- data page v2 pages marked is_compressed: false inside a SNAPPY column chunk (the format lets a writer leave a
// page's values uncompressed when compression does not pay). hyparquet-writer marks a page so when its codec is the
// empty name, which an identity "compressor" lets through; its footer then holds codec -1 (the name's index in
// CompressionCodecs), which is patched in place to SNAPPY (1): one byte each, zigzag 0x01 -> 0x02, found as field 4
// (codec, i32: header 0x15) between path_in_schema and field 5 (num_values, i64: header 0x16) of each column chunk.
// PLAIN encoding: a dictionary page has no such flag, and would be read as SNAPPY. DuckDB reads the patched file
// back and must give the values written.
{
    const text = fewDistinct(500, 0).map((v, i) => (i % 37 == 5 ? null : v));
    const file = path.join(PQ, 'v2_uncompressed_pages_snappy_chunk.parquet');
    parquetWriteFile({
        filename: file,
        columnData: [{ name: 'text', data: text, type: 'STRING', encoding: 'PLAIN' }],
        codec: '',
        compressors: { '': (bytes) => bytes },
        pageSize: 300,
        rowGroupSize: 200,
        statistics: false,
    });
    const buf = fs.readFileSync(file);
    const flen = buf.readUInt32LE(buf.length - 8), f0 = buf.length - 8 - flen;
    let patched = 0;
    for (let i = f0; i + 2 < buf.length - 8; i++) {
        if (buf[i] === 0x15 && buf[i + 1] === 0x01 && buf[i + 2] === 0x16) { buf[i + 1] = 0x02; patched++; }
    }
    if (patched !== 3) throw new Error(`${file}: patched the codec of ${patched} column chunks, expected 3 (500 rows in row groups of 200)`);
    fs.writeFileSync(file, buf);
    const r = await duck.runAndReadAll(`SELECT text FROM read_parquet('${file}')`);
    const back = r.getRows().map((row) => row[0]);
    if (back.length !== text.length || back.some((v, i) => v !== text[i])) throw new Error(`${file}: DuckDB reads other values back`);
    record(PQ, 'v2_uncompressed_pages_snappy_chunk.parquet', text);
}

// --- the FineWeb stand-in: two files named like the real download ------------------------------------------------
{
    // ~300 KB of text (~90k GPT-2 tokens): enough for 4000 validation tokens and 4 training shards of 20000
    let docs = [], bytes = 0;
    for (const p of paragraphs) {
        if (bytes > 300000) break;
        docs.push(p);
        bytes += Buffer.byteLength(p);
    }
    const half = Math.ceil(docs.length / 2);
    const files = [['000_00000.parquet', docs.slice(0, half)], ['001_00000.parquet', docs.slice(half)]];
    let k = 0;
    for (const [name, part] of files) {
        const rows = part.map((t) => {
            const i = k++;
            const dump = i % 3 === 0 ? 'CC-MAIN-2013-20' : 'CC-MAIN-2024-10';
            return [t, `<urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}>`, dump, `https://example.org/${i}`,
                `2013-05-18T${String(i % 24).padStart(2, '0')}:48:54Z`,
                `s3://commoncrawl/crawl-data/${dump}/segments/1368696381249.29/warc/CC-MAIN-${i % 7}.warc.gz`, 'en',
                0.9 + (i % 10) / 100, Math.ceil(Buffer.byteLength(t) / 4)];
        });
        await duckTable('fw', ['text VARCHAR', 'id VARCHAR', 'dump VARCHAR', 'url VARCHAR', 'date VARCHAR', 'file_path VARCHAR',
            'language VARCHAR', 'language_score DOUBLE', 'token_count BIGINT'], rows);
        await duckCopy('fw', path.join(FW, name), `COMPRESSION snappy, PARQUET_VERSION V1, ROW_GROUP_SIZE 2048, ${DICT}`);
        record(FW, name, part);
    }
}

// --- the TinyStories stand-in: the dataset's two text files, stories separated by a line "<|endoftext|>" ----------
{
    const TS = path.join(REPO, 'tests/data/tinystories');
    fs.mkdirSync(TS, { recursive: true });
    const stories = (from, n) => paragraphs.slice(from, from + n).map((p) => `${p}\n<|endoftext|>\n`).join('');
    fs.writeFileSync(path.join(TS, 'TinyStoriesV2-GPT4-valid.txt'), stories(3000, 30));
    fs.writeFileSync(path.join(TS, 'TinyStoriesV2-GPT4-train.txt'), stories(3100, 200));
}

// --- seeds of the fuzz target fuzz/parquet.c: the same kinds of files, a few short rows each (under 4 KB) ----------
{
    const FZ = path.join(REPO, 'fuzz/corpus/parquet');
    fs.mkdirSync(FZ, { recursive: true });
    const short = ['a', null, 'b\u0000c', 'caf\u00e9', '', 'a', 'xyzxyzxyzxyzxyzxyzxyz', 'a', null, 'b\u0000c', 'q'];
    await duckTable('s1', ['text VARCHAR', 'n BIGINT'], short.map((t, i) => [forSql(t), i]));
    await duck.run(`UPDATE s1 SET text = replace(text, '<NUL>', chr(0)) WHERE text LIKE '%<NUL>%'`);
    await duckCopy('s1', path.join(FZ, 'dict_snappy.parquet'), `COMPRESSION snappy, PARQUET_VERSION V1, ${DICT}`);
    await duckCopy('s1', path.join(FZ, 'dict_gzip.parquet'), `COMPRESSION gzip, PARQUET_VERSION V1, ${DICT}`);
    await duckCopy('s1', path.join(FZ, 'plain_uncompressed.parquet'), 'COMPRESSION uncompressed, PARQUET_VERSION V1');
    const uniq = short.map((t, i) => (t === null ? null : `${i}${t}`));
    await pqjsSmall(path.join(FZ, 'v1_pages_snappy.parquet'), uniq, false, true, 'SNAPPY');
    await pqjsSmall(path.join(FZ, 'v2_required_gzip.parquet'), uniq.map((t) => t ?? 'n'), true, false, 'GZIP');
    parquetWriteFile({ filename: path.join(FZ, 'v2_dict_nulls.parquet'), columnData: [{ name: 'text', data: short, type: 'STRING' }],
        pageSize: 20, rowGroupSize: 6, statistics: false });
    // the harness's input: one byte choosing the column (0: text), then the file
    for (const f of fs.readdirSync(FZ)) fs.writeFileSync(path.join(FZ, f), Buffer.concat([Buffer.from([0]), fs.readFileSync(path.join(FZ, f))]));
}
async function pqjsSmall(file, text, v2, optional, codec) {
    const schema = new parquetjs.ParquetSchema({ text: { type: 'UTF8', optional, compression: codec } });
    const w = await parquetjs.ParquetWriter.openFile(schema, file, { useDataPageV2: v2, pageSize: 3, rowGroupSize: 6 });
    for (const t of text) await w.appendRow(t === null ? {} : { text: t });
    await w.close();
}

fs.writeFileSync(path.join(PQ, 'expected.txt'), manifest.join('\n') + '\n');
console.log(manifest.join('\n'));
