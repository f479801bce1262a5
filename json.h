/*
json.h: the one place where the project parses JSON (encoder.json, safetensors headers, config.json, sharded
checkpoint indexes): cJSON from Debian (libcjson-dev) does the parsing, and every syntax error is reported the same
way, with the line and column where parsing stopped. Static functions only; include after <cjson/cJSON.h> is
available (build with -lcjson).

    char err[256];
    cJSON* root = json_parse(text, n, err, sizeof(err));
    if (!root) { fatal("'%s' is not valid JSON: %s", path, err); }   // "line 3, column 17: ..."
*/
#ifndef JSON_H
#define JSON_H

#include <stdio.h>
#include <string.h>
#include <cjson/cJSON.h>

// Line and column (both from 1) of byte offset pos in text[0..n).
static void json__position(const char* text, size_t n, size_t pos, int* line, int* column) {
    *line = 1;
    *column = 1;
    for (size_t i = 0; i < pos && i < n; i++) {
        if (text[i] == '\n') { (*line)++; *column = 1; } else { (*column)++; }
    }
}

// Parses text[0..n) as one JSON document (nothing but whitespace may follow it; a NUL byte inside is an error).
// Returns the tree (free with cJSON_Delete), or NULL with err = "line L, column C: <what was found there>".
static cJSON* json_parse(const char* text, size_t n, char* err, size_t cap) {
    size_t len = strnlen(text, n);
    if (len < n) {
        int line, col;
        json__position(text, n, len, &line, &col);
        snprintf(err, cap, "line %d, column %d: a NUL byte", line, col);
        return NULL;
    }
    const char* end = NULL;
    cJSON* root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    size_t stop = root ? (size_t)(end - text) : (end ? (size_t)(end - text) : 0);
    if (root) {
        while (stop < n && (text[stop] == ' ' || text[stop] == '\t' || text[stop] == '\n' || text[stop] == '\r')) { stop++; }
        if (stop == n) { return root; }
        cJSON_Delete(root);
    }
    int line, col;
    json__position(text, n, stop, &line, &col);
    if (n == 0 || stop >= n) { // (cJSON points a text cut short at its last token, so this is mostly an empty one)
        snprintf(err, cap, "line %d, column %d: %s", line, col, n == 0 ? "the text is empty" : "the text ends in the middle of a value");
    } else {
        char near[24];
        size_t k = 0;
        for (size_t i = stop; i < n && k + 1 < sizeof(near) && text[i] != '\n'; i++) {
            near[k++] = (unsigned char)text[i] >= 0x20 && (unsigned char)text[i] < 0x7f ? text[i] : '?';
        }
        near[k] = '\0';
        snprintf(err, cap, "line %d, column %d: %s near \"%s\"", line, col, root ? "data after the JSON value" : "syntax error", near);
    }
    return NULL;
}

#endif // JSON_H
