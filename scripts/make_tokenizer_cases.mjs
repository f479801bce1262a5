// make_tokenizer_cases.mjs: generates tests/data/tokenizer_cases.txt, the expected GPT-2 token ids that
// tests/test_tokenizer.c checks our encoder against. The oracle is the npm package js-tiktoken ("gpt2").
//
//   mkdir -p /tmp/jstt && (cd /tmp/jstt && npm init -y && npm i js-tiktoken)   # outside the repo
//   JS_TIKTOKEN=/tmp/jstt/node_modules/js-tiktoken DATA_MIRROR=../shared/data \
//       node scripts/make_tokenizer_cases.mjs > tests/data/tokenizer_cases.txt
//
// Output: comment lines start with '#'; every other line is tab-separated:
//   case <name> <input bytes as hex> <ids separated by spaces>
//   corpus <file name> <size in bytes> <number of ids> <FNV-1a 64 of the ids as little-endian uint32, hex>
// Case names say where the ids come from:
//   (plain)   js-tiktoken's gpt2 encoding of the text.
//   ws_*      js-tiktoken with \s in the pattern replaced by the Unicode White_Space set, which is what tiktoken's
//             Rust regex (and our encoder) mean by \s. JavaScript's \s differs on U+0085 and U+FEFF only.
//   invalid_* byte strings that are not UTF-8, by the documented rule of tokenizer.h: maximal well-formed UTF-8
//             runs are encoded on their own (by js-tiktoken here), every other byte is its own single-byte token.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(import.meta.url);
const pkgDir = process.env.JS_TIKTOKEN || "/tmp/jstt/node_modules/js-tiktoken";
const { Tiktoken } = require(path.join(pkgDir, "dist/index.cjs"));
const gpt2 = require(path.join(pkgDir, "dist/ranks/gpt2.cjs"));
const pkgVersion = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;

const enc = new Tiktoken(gpt2);
const WS = "[\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
const NOT_WS = "[^\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
const wsPattern = gpt2.pat_str
    .replace("[^\\s\\p{L}\\p{N}]", "[^\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\p{L}\\p{N}]")
    .replace("\\s+(?!\\S)", WS + "+(?!" + NOT_WS + ")")
    .replace(/\|\\s\+$/, "|" + WS + "+");
if (wsPattern === gpt2.pat_str) { throw new Error("pattern rewrite failed"); }
const encWs = new Tiktoken({ ...gpt2, pat_str: wsPattern });

const utf8 = new TextEncoder();
const hex = (bytes) => Buffer.from(bytes).toString("hex");
const out = [];
const names = new Set();
function emit(name, bytes, ids) {
    if (names.has(name)) { throw new Error("duplicate case name " + name); }
    names.add(name);
    out.push(["case", name, hex(bytes), ids.join(" ")].join("\t"));
}
const text = (name, s) => emit(name, utf8.encode(s), enc.encode(s, [], []));
const textWs = (name, s) => emit(name, utf8.encode(s), encWs.encode(s, [], []));

// ---------------------------------------------------------------------------------------------------------
// hand-picked texts
text("empty", "");
text("english", "Hello world! This is a test of the GPT-2 tokenizer, which splits text into words.");
text("english_paragraph",
    "The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times;\n" +
    "it was the age of wisdom, it was the age of foolishness...\n\nCHAPTER II.\n\n\"Well,\" said he, \"what now?\"");
text("single_chars", "a");
text("single_space", " ");
text("code_c", "#include <stdio.h>\n\nint main(int argc, char** argv) {\n    for (int i = 0; i < argc; i++) {\n\t\tprintf(\"%s\\n\", argv[i]);\n    }\n    return 0;\n}\n");
text("code_python", "def f(x):\n    if x <= 0:\n        return []\n    return [y ** 2 for y in range(x)]  # squares\n\n\nclass A(object):\n    pass\n");
text("code_json", "{\"key\": [1, 2.5, -3e10, null, true], \"nested\": {\"a\": \"b\\u00e9\"}}");
text("ws_between_words", "a  b   c    d\te\t\tf");
text("ws_trailing_spaces", "hello   ");
text("ws_trailing_newlines", "hello\n\n\n");
text("ws_leading", "   leading spaces");
text("ws_only_spaces", "        ");
text("ws_only_newlines", "\n\n\n\n");
text("ws_spaces_then_newline", "a   \n  b");
text("ws_mixed_runs", "x \t \n \r\n  y\n\n  \n z");
text("ws_crlf", "line one\r\nline two\r\n\r\nline four\r\n");
text("ws_vertical", "a\u000bb\u000cc");
text("ws_unicode_spaces", "a\u00a0b\u2003c\u3000d\u2028e\u2029f\u1680g\u202fh\u205fi \u00a0 j");
text("ws_long_run", " ".repeat(2000) + "x");
text("ws_long_newlines", "\n".repeat(1500) + "end");
text("contractions", "I'm sure you're right, they've said he'll go and she'd stay; it's John's.");
text("contractions_upper", "I'M SURE YOU'RE RIGHT, THEY'VE SAID HE'LL GO AND SHE'D STAY; IT'S JOHN'S");
text("contractions_mixed", "It'S x'T y'Re don't won't can't 'll 'd ''s '''  's'");
text("apostrophes", "rock 'n' roll, the '90s, O'Neil's, 'quoted'");
text("numbers", "In 2024, 1234567890 people paid $3.14159 or 1,000,000.00 EUR; 007 agents; 12345678901234567890.");
text("numbers_unicode", "Arabic-Indic \u0663\u0664\u0665, Devanagari \u0967\u0968\u0969, roman \u216b\u2160, fractions \u00bd\u00be, superscript x\u00b2");
text("accents", "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c6r\u00f8sk\u00f8bing \u00fcber Stra\u00dfe \u0142\u00f3d\u017a");
text("accents_nfd", "cafe\u0301 nai\u0308ve re\u0301sume\u0301");
text("combining_marks", "a\u0300\u0301\u0302\u0303 Z\u0351\u0364\u0350a\u0360\u0356l\u0314g\u0350o");
text("cjk_japanese", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002\u6771\u4eac\u306f\u5927\u304d\u3044\u3002");
text("cjk_chinese", "\u4e2d\u6587\u6587\u672c\uff0c\u5305\u62ec\u6807\u70b9\u7b26\u53f7\u3002\u4f60\u597d\uff0c\u4e16\u754c\uff01");
text("cjk_korean", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4.");
text("emoji", "\ud83d\ude00\ud83d\udc4d\ud83c\udffd \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67\u200d\ud83d\udc66 \ud83c\uddfa\ud83c\uddf8 \u2764\ufe0f done");
text("devanagari", "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e \u0928\u092e\u0938\u094d\u0924\u0947");
text("thai", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a");
text("arabic_hebrew", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd");
text("mixed_scripts", "Hello \u043c\u0438\u0440 \u4e16\u754c \u0645\u0631\u062d\u0628\u0627 \u03ba\u03cc\u03c3\u03bc\u03b5 123abc\u00e9\u4e16");
text("greek_cyrillic", "\u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430 \u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439\u0442\u0435");
text("punctuation", "!!!???... --- *** ### @@@ ~~~ ``` ((( ))) [[[ ]]] {{{ }}} <<< >>> ||| \\\\ //");
text("special_as_text", "<|endoftext|> and <|endoftext|>hello<|endoftext|>");
text("control_chars", "a\u0000b\u0001c\u007fd\u001be[0m\u0008");
text("format_chars", "zero\u200bwidth\u200cjoin\u200dnon\u2060word \u180e mongolian \u00ad soft");
text("private_use", "\ue000\uf8ff x \udb80\udc00");
text("astral", "\ud835\udc00\ud835\udc01 math \ud800\udf00 gothic \ud840\udc00 ext-b");
text("long_letters", "a".repeat(1000));
text("long_pattern", "ab".repeat(300) + " " + "xyz".repeat(100));
text("long_digits", "1234567890".repeat(50));
text("long_punct", "=-".repeat(200));
text("url_email", "See https://example.com/path?q=1&r=two#frag or mail me@example.org.");
text("markdown", "# Title\n\n- item *one*\n- item **two**\n\n> quote\n\n```js\nlet x = 1;\n```\n");
textWs("ws_nel", "a\u0085b \u0085 c\u0085\u0085");
textWs("ws_bom", "\ufeffstart \ufeff mid\ufeff");
textWs("ws_nel_runs", "x \u0085\u0085 \n y\u0085");

// ---------------------------------------------------------------------------------------------------------
// seeded random strings from a pool of characters of every class the pattern distinguishes
let seed = 12345;
const rand = () => { seed = (seed * 1103515245 + 12345) >>> 0; return seed / 4294967296; };
const pool = [
    ..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    ..."   \n\n\t\r'''sStTmdlrve.,;:!?-_()[]{}<>|/\\\"#$%&*+=@^`~",
    "\u00e9", "\u00c9", "\u00f1", "\u00df", "\u0301", "\u0308", "\u00a0", "\u2003", "\u3000", "\u2028",
    "\u4e2d", "\u6587", "\u65e5", "\u306e", "\u30c6", "\ud55c", "\u0645", "\u05e9", "\u0939", "\u093f", "\u094d",
    "\u0663", "\u00bd", "\u00b2", "\u216b", "\u200d", "\u200b", "\u00ad", "\u2764", "\ufe0f",
    "\ud83d\ude00", "\ud83d\udc4d", "\ud83c\udffd", "\ud835\udc00", "\u0430", "\u03b1", "\u20ac", "\u00a3",
];
for (let k = 0; k < 200; k++) {
    const len = Math.floor(rand() * 40);
    let s = "";
    for (let i = 0; i < len; i++) { s += pool[Math.floor(rand() * pool.length)]; }
    text("random_" + String(k).padStart(3, "0"), s);
}

// ---------------------------------------------------------------------------------------------------------
// invalid UTF-8, by the rule in tokenizer.h (an independent implementation of it)
function utf8Len(b, i) {
    const n = b.length - i, c = b[i];
    const cont = (k) => (b[i + k] & 0xc0) === 0x80;
    if (c < 0x80) return 1;
    if (c < 0xc2) return 0;
    if (c < 0xe0) return n >= 2 && cont(1) ? 2 : 0;
    if (c < 0xf0) {
        if (n < 3 || !cont(1) || !cont(2)) return 0;
        if (c === 0xe0 && b[i + 1] < 0xa0) return 0;
        if (c === 0xed && b[i + 1] >= 0xa0) return 0;
        return 3;
    }
    if (c < 0xf5) {
        if (n < 4 || !cont(1) || !cont(2) || !cont(3)) return 0;
        if (c === 0xf0 && b[i + 1] < 0x90) return 0;
        if (c === 0xf4 && b[i + 1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}
function encodeBytesByRule(b) {
    const ids = [];
    let i = 0;
    while (i < b.length) {
        let j = i;
        while (j < b.length) { const k = utf8Len(b, j); if (k === 0) break; j += k; }
        if (j > i) { ids.push(...enc.encode(new TextDecoder("utf-8", { fatal: true }).decode(b.subarray(i, j)), [], [])); }
        if (j < b.length) { ids.push(enc.rankMap.get(String(b[j]))); j++; }
        i = j;
    }
    return ids;
}
const bytesCase = (name, arr) => { const b = Uint8Array.from(arr); emit(name, b, encodeBytesByRule(b)); };
const cat = (...parts) => parts.flatMap((p) => typeof p === "string" ? [...utf8.encode(p)] : p);
bytesCase("invalid_ff", [0xff]);
bytesCase("invalid_all_high_bytes", Array.from({ length: 128 }, (_, k) => 0x80 + k));
bytesCase("invalid_in_word", cat("abc", [0xff], "def"));
bytesCase("invalid_bad_continuation", cat([0xc3, 0x28], " ok"));
bytesCase("invalid_truncated_3byte", cat("x ", [0xe2, 0x82], " y"));
bytesCase("invalid_truncated_emoji", cat("smile ", [0xf0, 0x9f, 0x98], "x"));
bytesCase("invalid_surrogate", cat("a", [0xed, 0xa0, 0x80], "b"));
bytesCase("invalid_above_max", cat([0xf4, 0x90, 0x80, 0x80], "z"));
bytesCase("invalid_overlong", cat([0xc0, 0xaf, 0xe0, 0x80, 0xaf, 0xf0, 0x80, 0x80, 0xaf], "/"));
bytesCase("invalid_between_spaces", cat("hello ", [0xfe], " world  ", [0x80], "  \n"));
bytesCase("invalid_lone_continuations", cat("caf", [0xa9], " ", [0x80, 0x80, 0x80], "'s"));
bytesCase("invalid_latin1_text", cat("na", [0xef], "ve r", [0xe9], "sum", [0xe9], " co\u00f6perate"));
for (let k = 0; k < 40; k++) {
    const len = Math.floor(rand() * 30);
    const arr = [];
    for (let i = 0; i < len; i++) {
        const r = rand();
        if (r < 0.5) arr.push(...utf8.encode(pool[Math.floor(rand() * pool.length)]));
        else arr.push(Math.floor(rand() * 256));
    }
    bytesCase("invalid_random_" + String(k).padStart(2, "0"), arr);
}

// ---------------------------------------------------------------------------------------------------------
// a whole corpus, checked by count and hash when the test finds the file
function fnv1a64Ids(ids) {
    let h = 0xcbf29ce484222325n;
    const prime = 0x100000001b3n, mask = 0xffffffffffffffffn;
    for (const id of ids) {
        for (let k = 0; k < 4; k++) { h ^= BigInt((id >>> (8 * k)) & 0xff); h = (h * prime) & mask; }
    }
    return h.toString(16).padStart(16, "0");
}
const mirror = process.env.DATA_MIRROR || "data";
const corpusPath = path.join(mirror, "tinyshakespeare.txt");
if (fs.existsSync(corpusPath)) {
    const data = fs.readFileSync(corpusPath);
    const ids = enc.encode(new TextDecoder("utf-8", { fatal: true }).decode(data), [], []);
    out.push(["corpus", "tinyshakespeare.txt", data.length, ids.length, fnv1a64Ids(ids)].join("\t"));
}

process.stdout.write(
    "# Generated by scripts/make_tokenizer_cases.mjs with js-tiktoken " + pkgVersion + " (gpt2). Do not edit.\n" +
    "# case<TAB>name<TAB>input hex<TAB>ids | corpus<TAB>file<TAB>bytes<TAB>count<TAB>fnv1a64 of ids (uint32 LE)\n" +
    out.join("\n") + "\n");
