#!/usr/bin/env bash
# scripts/data_tests.sh: the data preparation without the network: parquet_text on the committed parquet files
# (tests/data/parquet/, made by scripts/make_parquet_tests.mjs with three writers) against the outputs recorded
# from the values written; malformed files (truncated, bad magic, footer length, flipped bytes, faked codecs)
# refused with "error: FILE: ..." and exit 1, never a crash (under AddressSanitizer + UBSan when the compiler has
# them); scripts/prepare_fineweb.sh on the FineWeb stand-in (tests/data/fineweb) and scripts/prepare_tinystories.sh
# on the TinyStories one: token counts, the decoded text, idempotence, failed and interrupted runs, bad settings.
# Run from anywhere after `make` (needs ./parquet_text and ./tokenize); last line "N passed, N failed". ~10 s.
set -u
cd "$(dirname "$0")/.."
passed=0
failed=0
source scripts/test_lib.sh
S=${DATA_TESTS_DIR:-/tmp/data_tests.$$}
rm -rf "$S"
mkdir -p "$S"
trap 'rm -rf "$S"' EXIT
VOCAB=$(cd "${GPT2_VOCAB_DIR:-data/gpt2}" 2>/dev/null && pwd || echo "${GPT2_VOCAB_DIR:-data/gpt2}")
export GPT2_VOCAB_DIR=$VOCAB

for b in parquet_text tokenize; do
    [ -x "./$b" ] || { echo "FAIL data_tests: ./$b is not built (make)"; echo "0 passed, 1 failed"; exit 1; }
done

# --- parquet_text on every test file -----------------------------------------------------------------------------
# PQ: the binary under test; a sanitizer build of the same source when the compiler can make one (seconds)
PQ=./parquet_text
zl=-lz
grep -q no-zlib build/parquet_text.features 2>/dev/null && zl=-DNO_ZLIB
if cc -std=gnu11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
    parquet_text.c -o "$S/parquet_text_san" $zl -lm 2>"$S/san.log"; then
    PQ=$S/parquet_text_san # (leaks: the fuzz target checks them)
    export ASAN_OPTIONS=exitcode=86:detect_leaks=0 UBSAN_OPTIONS=exitcode=86:print_stacktrace=1
    echo "data_tests: parquet_text under AddressSanitizer + UBSan"
else
    echo "data_tests: no sanitizer build ($(head -n 1 "$S/san.log")); exit statuses only"
fi

# decodes FILE; checks "VALUES SHA256" of its output
check_decode() {
    local f=$1 want=$2 got rc
    "$PQ" "$f" > "$S/out.bin" 2> "$S/err.txt"
    rc=$?
    if [ "$rc" -ne 0 ]; then fail "decode $f" "exit status $rc: $(head -c 300 "$S/err.txt")"; return; fi
    got="$(tr -cd '\0' < "$S/out.bin" | wc -c) $(sha256sum < "$S/out.bin" | cut -c1-64)"
    check "decode $f" "$([ "$got" = "$want" ] || echo "got $got, expected $want")"
}
# runs parquet_text on FILE: it must succeed (0) or refuse with "error: FILE:" and exit 1; prints the message.
# $2 = must: it must refuse.
run_bad() {
    local f=$1 rc
    "$PQ" "$f" > /dev/null 2> "$S/err.txt"
    rc=$?
    if [ "$rc" -eq 0 ] && [ "${2:-}" != must ]; then return 0; fi
    if [ "$rc" -ne 1 ] || ! grep -q "^error: $f: " "$S/err.txt"; then
        echo "exit $rc: $(grep -m 3 -E 'error|ERROR|runtime' "$S/err.txt" | tr '\n' ' ')"
        return 1
    fi
    cat "$S/err.txt" >> "$S/messages.txt"
}

while read -r f a b; do
    if [ "$a" = refuse ]; then
        "$PQ" "$f" > /dev/null 2> "$S/err.txt"
        rc=$?
        check "refuse $f ($b)" "$([ $rc -eq 1 ] && grep -q "^error: $f: .*$b" "$S/err.txt" || echo "exit $rc: $(head -c 300 "$S/err.txt")")"
    else
        check_decode "$f" "$a $b"
    fi
done < tests/data/parquet/expected.txt

# the files cover what they are for: page kinds, encodings and codecs, several pages and row groups in one file
for want in "DICTIONARY_PAGE" "PLAIN_DICTIONARY" "RLE_DICTIONARY" "DATA_PAGE_V2" "DATA_PAGE, encoding PLAIN" \
    "codec SNAPPY" "codec GZIP" "codec UNCOMPRESSED" "is_compressed false"; do
    n=$(for f in tests/data/parquet/*.parquet; do ./parquet_text --pages "$f" 2>&1 >/dev/null; done | grep -c "$want")
    check "the test files hold '$want'" "$([ "$n" -gt 0 ] || echo "none")"
done
pages=$(./parquet_text --pages tests/data/parquet/v1_pages_snappy.parquet 2>&1 >/dev/null)
check "v1_pages_snappy: several row groups and several v1 pages per chunk" \
    "$([ "$(echo "$pages" | grep -c '^chunk')" -ge 2 ] && [ "$(echo "$pages" | grep -c '^page: DATA_PAGE,')" -ge 6 ] || echo "$pages" | head -n 3)"

# another column, a missing column, a non-string column, several files in one call
out=$(./parquet_text --column id tests/data/parquet/v2_dict_nulls.parquet | tr '\0' '\n' | sed -n '1p;900p')
check "--column id" "$([ "$out" = "$(printf 'id-0\nid-899')" ] || echo "got '$out'")"
./parquet_text --column nosuch tests/data/parquet/dict_snappy.parquet > /dev/null 2> "$S/err.txt"
check "a missing column is refused, naming the columns" "$([ $? -eq 1 ] && grep -q "no column 'nosuch' (the file has: text, id, dump" "$S/err.txt" || cat "$S/err.txt")"
./parquet_text --column token_count tests/data/parquet/dict_snappy.parquet > /dev/null 2> "$S/err.txt"
check "a non-string column is refused" "$([ $? -eq 1 ] && grep -q "has type INT64" "$S/err.txt" || cat "$S/err.txt")"
n=$(./parquet_text tests/data/fineweb/000_00000.parquet tests/data/fineweb/001_00000.parquet | tr -cd '\0' | wc -c)
check "two files in one call" "$([ "$n" = $((1059 + 1058)) ] || echo "$n values")"
./parquet_text --repeat 3 tests/data/parquet/dict_snappy.parquet > "$S/rep.bin" 2> "$S/err.txt"
n1=$(./parquet_text tests/data/parquet/dict_snappy.parquet | tr -cd '\0' | wc -c)
n3=$(tr -cd '\0' < "$S/rep.bin" | wc -c)
check "--repeat 3 decodes (and writes) the file 3 times and prints the throughput" "$(grep -q 'MB/s' "$S/err.txt" && [ "$n3" = $((3 * n1)) ] || echo "$n3 values of 3 x $n1; $(cat "$S/err.txt")")"
cmp -s <(./parquet_text -- tests/data/parquet/dict_snappy.parquet) <(./parquet_text tests/data/parquet/dict_snappy.parquet)
check "'--' ends the flags" "$([ $? -eq 0 ] || echo "the output differs")"
./parquet_text --repeat 0 tests/data/parquet/dict_snappy.parquet > /dev/null 2>&1
check "--repeat 0 is refused" "$([ $? -ne 0 ] || echo "accepted")"

# --- malformed files ---------------------------------------------------------------------------------------------
# flip FILE OFFSET OUT: OUT is FILE with the byte at OFFSET inverted
flip() { perl -e 'local $/; open(my $f, "<:raw", $ARGV[0]) or die; my $d = <$f>; substr($d, $ARGV[1], 1) = chr(ord(substr($d, $ARGV[1], 1)) ^ 0xff); open(my $o, ">:raw", $ARGV[2]) or die; print $o $d;' "$@"; }
: > "$S/messages.txt"
problems=""
for f in tests/data/parquet/dict_snappy.parquet tests/data/parquet/v2_dict_nulls.parquet tests/data/parquet/dict_gzip.parquet tests/data/parquet/v1_pages_snappy.parquet; do
    size=$(stat -c %s "$f")
    for cut in 0 3 4 11 12 100 $((size / 2)) $((size - 1)) $((size - 5)) $((size - 8)) $((size - 9)); do
        head -c "$cut" "$f" > "$S/bad.parquet"
        r=$(run_bad "$S/bad.parquet" must) || problems+="$f cut at $cut: $r; "
    done
done
check "truncated files are refused" "$problems"

f=tests/data/parquet/dict_snappy.parquet
{ printf 'PAR2'; tail -c +5 "$f"; } > "$S/bad.parquet"
check "bad magic at the start is refused" "$(run_bad "$S/bad.parquet" must)"
{ head -c -4 "$f"; printf 'PAR2'; } > "$S/bad.parquet"
check "bad magic at the end is refused" "$(run_bad "$S/bad.parquet" must)"
for len in '\xff\xff\xff\xff' '\x00\x00\x00\x00' '\xff\xff\x00\x00'; do
    { head -c -8 "$f"; printf "$len"; printf 'PAR1'; } > "$S/bad.parquet"
    check "footer length $len is refused" "$(run_bad "$S/bad.parquet" must)"
done
flip "$f" 4 "$S/bad.parquet" # the first page header's first field header: type 0xf is no thrift type
check "a broken page header is refused" "$(run_bad "$S/bad.parquet" must)"
# the codec field of the text column's ColumnMetaData (path ["text"], then field 4 = SNAPPY) faked to others
for codec in '\x0c:ZSTD' '\x08:BROTLI' '\x0a:LZ4' '\x06:LZO' '\x40:unknown'; do
    perl -0777 -pe "s/\\x19\\x18\\x04text\\x15\\x02/\\x19\\x18\\x04text\\x15${codec%%:*}/g" "$f" > "$S/bad.parquet"
    "$PQ" "$S/bad.parquet" > /dev/null 2> "$S/err.txt"
    rc=$?
    check "a faked codec ${codec#*:} is refused by name" "$([ $rc -eq 1 ] && grep -q "^error: $S/bad.parquet: column text: codec ${codec#*:}" "$S/err.txt" || echo "exit $rc: $(head -c 300 "$S/err.txt")")"
done

# bytes flipped all over (footer, page headers, snappy and gzip streams, dictionary indices, levels): refused or
# (where the byte does not matter, e.g. statistics) read, never a crash; the messages reach every kind of check
problems=""
for f in tests/data/parquet/*.parquet; do
    size=$(stat -c %s "$f")
    for ((i = 0; i < 24; i++)); do
        off=$(( (i * 7919 + size / 3) % size ))
        [ $i -ge 12 ] && off=$(( size - 8 - (i * 37) % (size / 4 + 1) )) # the footer's end
        [ "$off" -lt 0 ] && off=0
        flip "$f" "$off" "$S/bad.parquet"
        r=$(run_bad "$S/bad.parquet") || problems+="$f byte $off: $r; "
    done
done
check "flipped bytes: refused or read, never a crash" "$problems"
for kind in "bad thrift" "snappy" "gzip" "out of range"; do
    check "flipped bytes reach the '$kind' checks" "$(grep -q "$kind" "$S/messages.txt" || echo "no such message")"
done

# --- prepare_fineweb.sh on the FineWeb stand-in ------------------------------------------------------------------
# tokens OUT: the uint16 tokens of shards (after the 256 x int32 header), one per line
tokens() { for s in "$@"; do od -An -v -tu2 -j1024 "$s"; done | tr -s ' ' '\n' | sed '/^$/d'; }
FW=$S/fineweb
fw() { FINEWEB_LOCAL=tests/data/fineweb FINEWEB_SHARD_SIZE=20000 FINEWEB_VAL_TOKENS=4000 "$@"; }
fw bash scripts/prepare_fineweb.sh "$FW" > "$S/fw.log" 2>&1
rc=$?
nval=$(ls "$FW"/fineweb_val_*.bin 2>/dev/null | wc -l)
ntrain=$(ls "$FW"/fineweb_train_*.bin 2>/dev/null | wc -l)
check "prepare_fineweb (FINEWEB_LOCAL): shards and DONE" "$([ $rc -eq 0 ] && [ -f "$FW/DONE" ] && [ -f "$FW/gpt2_tokenizer.bin" ] && [ "$nval" -ge 1 ] && [ "$ntrain" -ge 4 ] || { echo "exit $rc, $nval val, $ntrain train shards"; tail -n 5 "$S/fw.log"; })"
tokens "$FW"/fineweb_val_*.bin > "$S/val.ids"
tokens "$FW"/fineweb_train_*.bin > "$S/train.ids"
full=$(tokens "$FW"/fineweb_train_00000{0,1,2}.bin | wc -l)
check "4000 validation tokens, training shards of 20000" "$([ "$(wc -l < "$S/val.ids")" = 4000 ] && [ "$full" = 60000 ] || echo "$(wc -l < "$S/val.ids") val tokens, $full in the first 3 train shards")"
# the same documents through tokenize directly, in one split: the same token stream
./parquet_text tests/data/fineweb/*.parquet | ./tokenize shards --vocab "$VOCAB" --out-dir "$S/direct" --name d --split train \
    --shard-size 1000000000 --doc-sep '\0' --drop-sep > /dev/null 2>&1
tokens "$S/direct"/d_train_*.bin > "$S/direct.ids"
check "the shards hold the tokens of the documents encoded directly" "$(cat "$S/val.ids" "$S/train.ids" | cmp -s - "$S/direct.ids" || echo "$(cat "$S/val.ids" "$S/train.ids" | wc -l) tokens vs $(wc -l < "$S/direct.ids") encoded directly")"
# decoded, the shards are the documents, each after <|endoftext|>
cat "$S/val.ids" "$S/train.ids" | tr '\n' ' ' | ./tokenize decode --vocab "$VOCAB" > "$S/decoded.txt" 2> "$S/err.txt"
./parquet_text tests/data/fineweb/*.parquet | perl -0 -ne 'chomp; print "<|endoftext|>$_"' > "$S/docs.txt"
check "the shards decode to the documents" "$(cmp "$S/decoded.txt" "$S/docs.txt" 2>&1 | head -c 300)"
before=$(ls -l --time-style=+%s.%N "$FW")
fw bash scripts/prepare_fineweb.sh "$FW" > "$S/fw2.log" 2>&1
check "a second run is a no-op" "$([ $? -eq 0 ] && grep -q "up to date" "$S/fw2.log" && [ "$before" = "$(ls -l --time-style=+%s.%N "$FW")" ] || cat "$S/fw2.log")"
FINEWEB_LOCAL=tests/data/fineweb FINEWEB_NUM_FILES=1 FINEWEB_SHARD_SIZE=20000 FINEWEB_VAL_TOKENS=4000 bash scripts/prepare_fineweb.sh "$S/fw_one" > /dev/null 2>&1
n1=$(tokens "$S"/fw_one/fineweb_*.bin | wc -l)
n0=$(./parquet_text tests/data/fineweb/000_00000.parquet | ./tokenize shards --vocab "$VOCAB" --out-dir "$S/direct0" --name d --split train --doc-sep '\0' --drop-sep 2>/dev/null >/dev/null; tokens "$S"/direct0/d_train_*.bin | wc -l)
check "FINEWEB_NUM_FILES=1 reads the first file only" "$([ "$n1" = "$n0" ] && [ "$n1" -gt 0 ] || echo "$n1 tokens, the first file has $n0")"

# a run failing midway (a good file, then a corrupt one) leaves no DONE and no shards; the next good run completes
mkdir -p "$S/mixed"
cp tests/data/fineweb/000_00000.parquet "$S/mixed/"
head -c 50000 tests/data/fineweb/001_00000.parquet > "$S/mixed/001_00000.parquet"
FINEWEB_LOCAL=$S/mixed FINEWEB_SHARD_SIZE=20000 FINEWEB_VAL_TOKENS=4000 bash scripts/prepare_fineweb.sh "$S/fw_fail" > "$S/fail.log" 2>&1
rc=$?
left=$(ls -A "$S/fw_fail" 2>/dev/null | tr '\n' ' ')
check "a corrupt file midway fails the run, leaving nothing" "$([ $rc -ne 0 ] && grep -q "error: .*001_00000.parquet" "$S/fail.log" && [ -z "$left" ] || echo "exit $rc, left: '$left'")"
fw bash scripts/prepare_fineweb.sh "$S/fw_fail" > /dev/null 2>&1
check "the next good run completes" "$([ -f "$S/fw_fail/DONE" ] && cmp -s <(tokens "$S"/fw_fail/fineweb_train_*.bin) "$S/train.ids" || echo "no DONE or other shards")"
# what a killed run leaves (its staging folder, shards of an unfinished move, no DONE) is cleared by the next run
mkdir -p "$S/fw_kill/.incomplete.999999"
cp "$FW/fineweb_train_000000.bin" "$S/fw_kill/.incomplete.999999/"
cp "$FW/fineweb_train_000000.bin" "$S/fw_kill/fineweb_train_000009.bin"
fw bash scripts/prepare_fineweb.sh "$S/fw_kill" > /dev/null 2>&1
check "after a killed run: stale staging and shards removed, complete" "$([ -f "$S/fw_kill/DONE" ] && [ ! -e "$S/fw_kill/.incomplete.999999" ] && [ ! -e "$S/fw_kill/fineweb_train_000009.bin" ] && [ "$(ls "$S"/fw_kill/fineweb_*.bin | wc -l)" = $((nval + ntrain)) ] || ls -A "$S/fw_kill" | tr '\n' ' ')"
# a dead run's staging folder beside a complete set (an older version, killed between DONE and its exit trap, left an
# empty one): the next run is a no-op that removes it
mkdir "$S/fw_kill/.incomplete.999999"
fw bash scripts/prepare_fineweb.sh "$S/fw_kill" > "$S/fw_kill.log" 2>&1
check "beside DONE, a dead run's staging folder is removed by the next (no-op) run" "$(grep -q "up to date" "$S/fw_kill.log" && [ ! -e "$S/fw_kill/.incomplete.999999" ] || ls -A "$S/fw_kill" | tr '\n' ' ')"
# a real kill: SIGKILL to the script while it runs (its children may finish on their own; the move never happens)
mkdir -p "$S/slow"
cp tests/data/fineweb/*.parquet "$S/slow/"
# its own process group (setsid), killed whole, as a job scheduler or the machine going down would
FINEWEB_LOCAL=$S/slow FINEWEB_SHARD_SIZE=20000 FINEWEB_VAL_TOKENS=4000 setsid bash scripts/prepare_fineweb.sh "$S/fw_killed" > /dev/null 2>&1 &
pid=$!
# killed once the first shard is staged (midway on a fast machine too, where a fixed delay can land after the end)
for _ in $(seq 500); do
    [ -z "$(ls "$S/fw_killed"/.incomplete.*/fineweb_val_000000.bin 2>/dev/null)" ] || break
    sleep 0.01
done
kill -9 -- -"$pid" 2>/dev/null
wait "$pid" 2>/dev/null
# (ls -d: the staging folder counts even when empty, as it is when the kill falls between the move and DONE)
check "a run killed by SIGKILL leaves no DONE" "$([ ! -f "$S/fw_killed/DONE" ] || [ -z "$(ls -d "$S/fw_killed"/.incomplete.* 2>/dev/null)" ] || echo "DONE next to a staging folder")"
fw bash scripts/prepare_fineweb.sh "$S/fw_killed" > /dev/null 2>&1
check "... and the next run completes" "$([ -f "$S/fw_killed/DONE" ] && [ -z "$(ls -d "$S/fw_killed"/.incomplete.* 2>/dev/null)" ] && cmp -s <(tokens "$S"/fw_killed/fineweb_train_*.bin) "$S/train.ids" || ls -A "$S/fw_killed" | tr '\n' ' ')"

# bad settings are refused before anything is written
mkdir -p "$S/empty"
for setting in FINEWEB_SHARD_SIZE=abc FINEWEB_SHARD_SIZE=0 FINEWEB_SHARD_SIZE=-5 FINEWEB_VAL_TOKENS=1e6 FINEWEB_NUM_FILES=0 \
    FINEWEB_SAMPLE=5BT FINEWEB_VARIANT=pile FINEWEB_LOCAL=/nonexistent FINEWEB_LOCAL=$S/empty; do
    env FINEWEB_LOCAL=tests/data/fineweb "$setting" bash scripts/prepare_fineweb.sh "$S/fw_bad" > "$S/bad.log" 2>&1
    rc=$?
    check "prepare_fineweb refuses $setting" "$([ $rc -ne 0 ] && grep -q "error: ${setting%%=*}" "$S/bad.log" && [ ! -e "$S/fw_bad/DONE" ] || { echo "exit $rc"; head -n 2 "$S/bad.log"; })"
done
# the default output folder follows the variant and the sample (relative to the current folder)
mkdir -p "$S/cwd"
(cd "$S/cwd" && FINEWEB_VARIANT=edu FINEWEB_SAMPLE=100BT FINEWEB_LOCAL="$OLDPWD/tests/data/fineweb" FINEWEB_SHARD_SIZE=20000 \
    FINEWEB_VAL_TOKENS=4000 bash "$OLDPWD/scripts/prepare_fineweb.sh" > /dev/null 2>&1)
check "FINEWEB_VARIANT=edu FINEWEB_SAMPLE=100BT: data/edu_fineweb100B" "$([ -f "$S/cwd/data/edu_fineweb100B/DONE" ] || ls -R "$S/cwd" | head -n 5)"

# --- prepare_fineweb.sh's download path, against a stand-in for curl (no network) ---------------------------------
# The stub serves http://hub.test/PATH from $STUB_HUB/PATH ('?' becomes '_'); PATH.link, when present, goes out as a
# `Link: <URL>; rel="next"` header (the Hub's pagination); PATH.fail fails the request as curl -f does (exit 22).
HUB=$S/hub
API_DIR=$HUB/api/datasets/HuggingFaceFW/fineweb/tree/main/sample
DL_DIR=$HUB/datasets/HuggingFaceFW/fineweb/resolve/main/sample/10BT
mkdir -p "$S/stubbin" "$API_DIR" "$DL_DIR"
cat > "$S/stubbin/curl" <<'STUB'
#!/usr/bin/env bash
out="" hdr="" url=""
while [ $# -gt 0 ]; do
    case "$1" in
        -o | -D | --retry) [ "$1" = -o ] && out="$2"; [ "$1" = -D ] && hdr="$2"; shift 2 ;;
        -*) shift ;;
        *) url="$1"; shift ;;
    esac
done
echo "$url" >> "$STUB_HUB/requests.log"
f="$STUB_HUB/${url#http://hub.test/}"
f="${f//\?/_}"
{ [ -f "$f" ] && [ ! -e "$f.fail" ]; } || exit 22
if [ -n "$hdr" ]; then
    { printf 'HTTP/1.1 200 OK\r\n'; [ -f "$f.link" ] && printf 'Link: <%s>; rel="next"\r\n' "$(cat "$f.link")"; printf '\r\n'; } > "$hdr"
fi
if [ -n "$out" ]; then cp "$f" "$out"; else cat "$f"; fi
STUB
chmod +x "$S/stubbin/curl"
cp tests/data/fineweb/000_00000.parquet tests/data/fineweb/001_00000.parquet "$DL_DIR/"
# the listing in two pages, one file each (and a directory entry, which is not a parquet file)
printf '[{"type":"file","oid":"x","size":1,"path":"sample/10BT/001_00000.parquet"}]' > "$API_DIR/10BT_cursor=p2"
printf '[{"type":"directory","oid":"y","size":0,"path":"sample/10BT/extra"},{"type":"file","oid":"z","size":1,"path":"sample/10BT/000_00000.parquet"}]' > "$API_DIR/10BT"
echo "http://hub.test/api/datasets/HuggingFaceFW/fineweb/tree/main/sample/10BT?cursor=p2" > "$API_DIR/10BT.link"
stub_hub() { env PATH="$S/stubbin:$PATH" STUB_HUB="$HUB" HF_ENDPOINT=http://hub.test/ "$@"; } # CMD against the fake Hub
hub() { stub_hub FINEWEB_SHARD_SIZE=20000 FINEWEB_VAL_TOKENS=4000 "$@"; }
same_shards() { # DIR: the same shard files, byte for byte, as the FINEWEB_LOCAL run's
    local f
    [ "$(cd "$1" && ls fineweb_*.bin 2>/dev/null)" = "$(cd "$FW" && ls fineweb_*.bin)" ] || { echo "other shard files: $(ls "$1" | tr '\n' ' ')"; return; }
    for f in "$FW"/fineweb_*.bin; do cmp -s "$f" "$1/${f##*/}" || { echo "${f##*/} differs"; return; }; done
}
: > "$HUB/requests.log"
hub bash scripts/prepare_fineweb.sh "$S/fw_hub" > "$S/hub.log" 2>&1
rc=$?
check "download: the listing's two pages followed, both files fetched, the same shards as FINEWEB_LOCAL" \
    "$([ $rc -eq 0 ] && [ -f "$S/fw_hub/DONE" ] && grep -q 'cursor=p2' "$HUB/requests.log" && [ "$(grep -c 'resolve/main/sample/10BT/00[01]_00000.parquet$' "$HUB/requests.log")" = 2 ] || { echo "exit $rc"; tail -n 3 "$S/hub.log"; })$(same_shards "$S/fw_hub")"
touch "$API_DIR/10BT.fail"
hub env FINEWEB_NUM_FILES=2 bash scripts/prepare_fineweb.sh "$S/fw_nolist" > "$S/hub.log" 2>&1
rc=$?
check "download: without a listing, FINEWEB_NUM_FILES=2 fetches 000_00000 and 001_00000, the same shards" \
    "$([ $rc -eq 0 ] && grep -q "warning: cannot list" "$S/hub.log" || { echo "exit $rc"; tail -n 3 "$S/hub.log"; })$(same_shards "$S/fw_nolist")"
: > "$HUB/requests.log"
hub bash scripts/prepare_fineweb.sh "$S/fw_nolist14" > "$S/hub.log" 2>&1
rc=$?
check "download: without a listing or FINEWEB_NUM_FILES, 10BT's 14 names are tried; the missing third ends the run, no DONE" \
    "$([ $rc -ne 0 ] && grep -q 'sample/10BT/002_00000.parquet$' "$HUB/requests.log" && [ ! -e "$S/fw_nolist14/DONE" ] || { echo "exit $rc"; tail -n 2 "$S/hub.log"; })"
rm -f "$API_DIR/10BT.fail"
touch "$DL_DIR/001_00000.parquet.fail"
hub bash scripts/prepare_fineweb.sh "$S/fw_dlfail" > "$S/hub.log" 2>&1
rc=$?
check "download: a failed download fails the run, leaving no DONE and no shards" \
    "$([ $rc -ne 0 ] && [ ! -e "$S/fw_dlfail/DONE" ] && [ -z "$(ls "$S/fw_dlfail" 2>/dev/null)" ] || { echo "exit $rc: $(ls -A "$S/fw_dlfail" | tr '\n' ' ')"; tail -n 2 "$S/hub.log"; })"
rm -f "$DL_DIR/001_00000.parquet.fail"

# --- prepare_tinystories.sh on the TinyStories stand-in ----------------------------------------------------------
TS=$S/tinystories
ts() { TINYSTORIES_LOCAL=tests/data/tinystories TINYSTORIES_SHARD_SIZE=5000 "$@"; }
ts bash scripts/prepare_tinystories.sh "$TS" > "$S/ts.log" 2>&1
rc=$?
check "prepare_tinystories (TINYSTORIES_LOCAL): shards and DONE, no warnings" "$([ $rc -eq 0 ] && [ -f "$TS/DONE" ] && [ -f "$TS/tinystories_val_000000.bin" ] && [ -f "$TS/tinystories_train_000001.bin" ] && ! grep -q warning "$S/ts.log" || { echo "exit $rc"; tail -n 3 "$S/ts.log"; })"
for split in val:valid train:train; do
    tokens "$TS"/tinystories_${split%%:*}_*.bin | tr '\n' ' ' | ./tokenize decode --vocab "$VOCAB" > "$S/ts_decoded.txt" 2>/dev/null
    perl -0777 -ne 'for (split /\n<\|endoftext\|>\n/) { print "<|endoftext|>$_" }' "tests/data/tinystories/TinyStoriesV2-GPT4-${split#*:}.txt" > "$S/ts_docs.txt"
    check "tinystories ${split%%:*}: the shards decode to the stories" "$(cmp "$S/ts_decoded.txt" "$S/ts_docs.txt" 2>&1 | head -c 300)"
done
ts bash scripts/prepare_tinystories.sh "$TS" > "$S/ts2.log" 2>&1
check "prepare_tinystories: a second run is a no-op" "$(grep -q "up to date" "$S/ts2.log" || cat "$S/ts2.log")"
mkdir -p "$S/ts_half"
cp tests/data/tinystories/TinyStoriesV2-GPT4-valid.txt "$S/ts_half/"
TINYSTORIES_LOCAL=$S/ts_half bash scripts/prepare_tinystories.sh "$S/ts_bad" > "$S/bad.log" 2>&1
check "prepare_tinystories refuses a folder without the train file" "$([ $? -ne 0 ] && grep -q "error: TINYSTORIES_LOCAL" "$S/bad.log" && [ -z "$(ls -A "$S/ts_bad" 2>/dev/null)" ] || cat "$S/bad.log")"
mkdir -p "$S/ts_stale/.incomplete.999999"
echo x > "$S/ts_stale/tinystories_train_000007.bin"
ts bash scripts/prepare_tinystories.sh "$S/ts_stale" > /dev/null 2>&1
check "prepare_tinystories: stale staging and shards of an unfinished run removed" "$([ -f "$S/ts_stale/DONE" ] && [ ! -e "$S/ts_stale/.incomplete.999999" ] && [ ! -e "$S/ts_stale/tinystories_train_000007.bin" ] || ls -A "$S/ts_stale" | tr '\n' ' ')"
mkdir "$S/ts_stale/.incomplete.999999"
ts bash scripts/prepare_tinystories.sh "$S/ts_stale" > "$S/ts_stale.log" 2>&1
check "prepare_tinystories: beside DONE, a dead run's staging folder is removed by the next (no-op) run" "$(grep -q "up to date" "$S/ts_stale.log" && [ ! -e "$S/ts_stale/.incomplete.999999" ] || ls -A "$S/ts_stale" | tr '\n' ' ')"
# the download path, through the stand-in for curl: the same shards as TINYSTORIES_LOCAL; a failed stream leaves nothing
TS_DL=$HUB/datasets/roneneldan/TinyStories/resolve/main
mkdir -p "$TS_DL"
cp tests/data/tinystories/TinyStoriesV2-GPT4-valid.txt tests/data/tinystories/TinyStoriesV2-GPT4-train.txt "$TS_DL/"
stub_hub TINYSTORIES_SHARD_SIZE=5000 bash scripts/prepare_tinystories.sh "$S/ts_hub" > "$S/hub.log" 2>&1
rc=$?
check "prepare_tinystories: downloaded, the same shards as TINYSTORIES_LOCAL" "$([ $rc -eq 0 ] && [ -f "$S/ts_hub/DONE" ] || { echo "exit $rc"; tail -n 2 "$S/hub.log"; })$(
    for f in "$TS"/tinystories_*.bin; do cmp -s "$f" "$S/ts_hub/${f##*/}" || { echo "${f##*/} differs"; break; }; done)"
touch "$TS_DL/TinyStoriesV2-GPT4-train.txt.fail"
stub_hub TINYSTORIES_SHARD_SIZE=5000 bash scripts/prepare_tinystories.sh "$S/ts_dlfail" > "$S/hub.log" 2>&1
rc=$?
check "prepare_tinystories: a failed download fails the run, leaving no DONE and no shards" \
    "$([ $rc -ne 0 ] && [ -z "$(ls "$S/ts_dlfail" 2>/dev/null)" ] || { echo "exit $rc: $(ls -A "$S/ts_dlfail" | tr '\n' ' ')"; })"
for setting in TINYSTORIES_SHARD_SIZE=1e5 TINYSTORIES_SHARD_SIZE=0 TINYSTORIES_LOCAL=/nonexistent; do
    env TINYSTORIES_LOCAL=tests/data/tinystories "$setting" bash scripts/prepare_tinystories.sh "$S/ts_bad2" > "$S/bad.log" 2>&1
    rc=$?
    check "prepare_tinystories refuses $setting" "$([ $rc -ne 0 ] && grep -q "error: ${setting%%=*}" "$S/bad.log" || { echo "exit $rc"; head -n 2 "$S/bad.log"; })"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
