/* report_html.c — the campaign's report.html: one self-contained page made from report.md's text
 * (so the two never say different things), the SVG plots inline and the manifest at the end
 * (rl__camp_html_write, campaign_int.h).
 *
 * Self-contained: the page loads nothing (no script, no stylesheet link, no image file, no font):
 * its style is in a <style> element and each plot's SVG text is copied into it, the SVG's own ids
 * and the references to them (id=, href="#", url(#)) prefixed per plot so two plots never share
 * an id. Plots report.md names as ![alt](plots/NAME.svg) are inlined; a plot that cannot be read
 * is named in the page instead.
 *
 * Text is escaped for element content only (& < >): nothing from the results goes into an attribute.
 *
 * The markdown read is the subset report.c writes: "#", "##", "###" headings, "- " list items,
 * tables ("| a | b |" rows, the "|---|" line after the header), paragraphs, and inline `code`,
 * **strong** and *emphasis*. Text is escaped (& < >). A table row whose cells include the label
 * "contaminated" gets the class "contaminated" (shaded, as the plots mark those cases).
 */
#include <stdlib.h>
#include <string.h>

#include "bench/campaign_int.h"

static void esc(rl_buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '&') rl__buf_append_str(b, "&amp;");
        else if (c == '<') rl__buf_append_str(b, "&lt;");
        else if (c == '>') rl__buf_append_str(b, "&gt;");
        else rl__buf_append_byte(b, (uint8_t)c);
    }
}

/* Inline markdown of s[0..n): `code`, **strong**, *emphasis*; an unmatched marker is literal. */
static void inline_md(rl_buf *b, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const char *end;
        if (s[i] == '`' && (end = memchr(s + i + 1, '`', n - i - 1))) {
            rl__buf_append_str(b, "<code>");
            esc(b, s + i + 1, (size_t)(end - s - i - 1));
            rl__buf_append_str(b, "</code>");
            i = (size_t)(end - s) + 1;
            continue;
        }
        if (s[i] == '*' && i + 1 < n && s[i + 1] == '*') {
            const char *p = s + i + 2;
            end = NULL;
            for (; p + 1 < s + n; p++)
                if (p[0] == '*' && p[1] == '*') {
                    end = p;
                    break;
                }
            if (end) {
                rl__buf_append_str(b, "<strong>");
                inline_md(b, s + i + 2, (size_t)(end - s - i - 2));
                rl__buf_append_str(b, "</strong>");
                i = (size_t)(end - s) + 2;
                continue;
            }
        }
        if (s[i] == '*' && i + 1 < n && s[i + 1] != ' ' && (end = memchr(s + i + 1, '*', n - i - 1))) {
            rl__buf_append_str(b, "<em>");
            inline_md(b, s + i + 1, (size_t)(end - s - i - 1));
            rl__buf_append_str(b, "</em>");
            i = (size_t)(end - s) + 1;
            continue;
        }
        esc(b, s + i, 1);
        i++;
    }
}

/* Append the SVG at dir/rel with its ids prefixed by "pN-"; 0 if it could not be read. */
static int inline_svg(rl_buf *b, const char *dir, const char *rel, int n) {
    char path[RL_CAMP_PATH_MAX + 128], pre[16];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    rl_buf svg;
    rl__buf_init(&svg);
    char chunk[8192];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) rl__buf_append(&svg, chunk, got);
    fclose(f);
    const char *s = rl__camp_str(&svg), *start = strstr(s, "<svg");
    if (!start || rl__buf_error(&svg)) {
        rl__buf_release(&svg);
        return 0;
    }
    snprintf(pre, sizeof pre, "p%d-", n);
    static const char *const refs[] = {"id='", "id=\"", "href='#", "href=\"#", "url(#", NULL};
    for (const char *p = start; *p;) {
        int hit = 0;
        for (int k = 0; refs[k]; k++) {
            size_t l = strlen(refs[k]);
            if (!strncmp(p, refs[k], l)) {
                rl__buf_append(b, p, l);
                rl__buf_append_str(b, pre);
                p += l;
                hit = 1;
                break;
            }
        }
        if (!hit) rl__buf_append_byte(b, (uint8_t)*p++);
    }
    rl__buf_release(&svg);
    return 1;
}

/* A line of images "![alt](src) ![alt](src)": each SVG inlined in a figure. */
static void images(rl_buf *b, const char *dir, const char *s, size_t n, int *count) {
    const char *p = s, *e = s + n;
    while (p < e && (p = strstr(p, "![")) && p < e) {
        const char *close = strstr(p, "]("), *paren = close ? strchr(close, ')') : NULL;
        if (!close || !paren || paren > e) break;
        char rel[512];
        snprintf(rel, sizeof rel, "%.*s", (int)(paren - close - 2), close + 2);
        rl__buf_append_str(b, "<figure>");
        if (strstr(rel, ".svg") && inline_svg(b, dir, rel, ++*count)) {
        } else {
            rl__buf_append_str(b, "<p>Plot not inlined: ");
            esc(b, rel, strlen(rel));
            rl__buf_append_str(b, "</p>");
        }
        rl__buf_append_str(b, "<figcaption>");
        esc(b, rel, strlen(rel));
        rl__buf_append_str(b, "</figcaption></figure>\n");
        p = paren + 1;
    }
}

/* One table row "| a | b |" as <tr> with th (header) or td cells. */
static void table_row(rl_buf *b, const char *s, size_t n, int header) {
    const char *p = s + 1, *e = s + n;
    while (e > p && (e[-1] == ' ' || e[-1] == '\r')) e--;
    if (e > p && e[-1] == '|') e--;
    /* the label column: mark contaminated rows */
    int cont = 0;
    for (const char *q = p; q + 14 <= e; q++)
        if (!strncmp(q, "| contaminated", 14) && (q + 14 == e || q[14] == ' ' || q[14] == '|')) cont = 1;
    rl__buf_append_str(b, cont ? "<tr class=\"contaminated\">" : "<tr>");
    while (p <= e) {
        const char *bar = memchr(p, '|', (size_t)(e - p));
        const char *end = bar ? bar : e;
        const char *a = p, *z = end;
        while (a < z && *a == ' ') a++;
        while (z > a && z[-1] == ' ') z--;
        rl__buf_append_str(b, header ? "<th>" : "<td>");
        inline_md(b, a, (size_t)(z - a));
        rl__buf_append_str(b, header ? "</th>" : "</td>");
        if (!bar) break;
        p = bar + 1;
    }
    rl__buf_append_str(b, "</tr>\n");
}

int rl__camp_html_write(const char *dir, const char *md, size_t md_len, json_t *manifest, rl__errdetail *err) {
    rl_buf b;
    char path[RL_CAMP_PATH_MAX + 32];
    int n_svg = 0, in_list = 0, in_table = 0, rc = RL_OK;
    rl__buf_init(&b);
    rl__buf_append_str(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
    const char *title_end = memchr(md, '\n', md_len);
    if (md_len > 2 && md[0] == '#' && md[1] == ' ')
        esc(&b, md + 2, (size_t)((title_end ? title_end : md + md_len) - md - 2));
    else rl__buf_append_str(&b, "Campaign report");
    rl__buf_append_str(&b,
                       "</title>\n<style>\nbody{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;"
                       "line-height:1.4}\ntable{border-collapse:collapse;margin:.5em 0;font-size:90%}\n"
                       "th,td{border:1px solid #bbb;padding:2px 6px;text-align:left;vertical-align:top}\n"
                       "th{background:#eee}\ntr.contaminated td{background:#fde2e2}\ncode{font-size:90%}\n"
                       "figure{margin:1em 0}figure svg{width:100%;height:auto}\n"
                       "pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:85%}\n</style>\n</head><body>\n");
    const char *p = md, *end = md + md_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t n = (size_t)(le - p);
        int is_item = n >= 2 && p[0] == '-' && p[1] == ' ', is_row = n >= 1 && p[0] == '|';
        if (in_list && !is_item) rl__buf_append_str(&b, "</ul>\n"), in_list = 0;
        if (in_table && !is_row) rl__buf_append_str(&b, "</table>\n"), in_table = 0;
        if (n == 0) {
        } else if (is_row) {
            int sep = n >= 4 && !strncmp(p, "|---", 4);
            if (!sep) {
                if (!in_table) rl__buf_append_str(&b, "<table>\n");
                table_row(&b, p, n, !in_table);
                in_table = 1;
            }
        } else if (is_item) {
            if (!in_list) rl__buf_append_str(&b, "<ul>\n"), in_list = 1;
            rl__buf_append_str(&b, "<li>");
            inline_md(&b, p + 2, n - 2);
            rl__buf_append_str(&b, "</li>\n");
        } else if (p[0] == '#') {
            int level = 0;
            while (level < (int)n && p[level] == '#') level++;
            rl__buf_printf(&b, "<h%d>", level);
            inline_md(&b, p + level + 1, n > (size_t)level ? n - (size_t)level - 1 : 0);
            rl__buf_printf(&b, "</h%d>\n", level);
        } else if (n > 2 && p[0] == '!' && p[1] == '[') {
            images(&b, dir, p, n, &n_svg);
        } else {
            rl__buf_append_str(&b, "<p>");
            inline_md(&b, p, n);
            rl__buf_append_str(&b, "</p>\n");
        }
        p = nl ? nl + 1 : end;
    }
    if (in_list) rl__buf_append_str(&b, "</ul>\n");
    if (in_table) rl__buf_append_str(&b, "</table>\n");
    rl__buf_append_str(&b, "<h2>Manifest</h2>\n<p>What ran, on what, from which source (manifest.json):</p>\n<pre>");
    char *mj = manifest ? json_dumps(manifest, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (mj) esc(&b, mj, strlen(mj));
    else rl__buf_append_str(&b, "(no manifest)");
    free(mj);
    rl__buf_append_str(&b, "</pre>\n</body></html>\n");
    snprintf(path, sizeof path, "%s/report.html", dir);
    if (rl__buf_error(&b)) {
        rl__errdetail_append(err, "%s: out of memory", path);
        rc = RL_E_OUT_OF_MEMORY;
    } else {
        FILE *f = fopen(path, "w");
        int bad = !f || fwrite(b.data, 1, b.len, f) != b.len;
        if (f && fclose(f)) bad = 1;
        if (bad) {
            rl__errdetail_append(err, "cannot write %s", path);
            rc = RL_E_IO_ERROR;
        }
    }
    rl__buf_release(&b);
    return rc;
}
