package doctest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the module's root: the nearest folder above the test's with a go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// docFiles are the documents checked, relative to the root: README.md and docs/*.md.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		out = append(out, rel)
	}
	return out
}

// line is one line of a Markdown document, with what fenced block holds it.
type line struct {
	n     int    // 1-based
	text  string // the line
	fence string // the info string of the fenced block the line is in ("" for none, "-" for one without)
	mark  string // for a fence's opening line: the <!-- test: ... --> comment just before it
}

var testMark = regexp.MustCompile(`^<!--\s*test:\s*(\S+)\s*-->$`)

// parse splits a document into lines, noting fenced blocks (``` or ~~~) and test marks.
func parse(text string) []line {
	var out []line
	fence, marker, mark := "", "", ""
	for i, s := range strings.Split(text, "\n") {
		l := line{n: i + 1, text: s, fence: fence}
		trimmed := strings.TrimSpace(s)
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			marker = trimmed[:3]
			fence = strings.TrimSpace(strings.TrimLeft(trimmed, marker[:1]))
			if fence == "" {
				fence = "-"
			}
			l.mark, mark = mark, ""
			l.fence = "" // the opening line is outside the block's contents
		case fence != "" && strings.HasPrefix(trimmed, marker) && strings.Trim(trimmed, marker[:1]) == "":
			fence = ""
			l.fence = ""
			l.text = "" // the closing line holds nothing
		case fence == "":
			if m := testMark.FindStringSubmatch(trimmed); m != nil {
				mark = m[1]
			} else if trimmed != "" {
				mark = ""
			}
		}
		out = append(out, l)
	}
	return out
}

// block is a fenced block's contents.
type block struct {
	start int // the opening line's number
	info  string
	mark  string
	body  string
}

func blocks(lines []line) []block {
	var out []block
	var cur *block
	for _, l := range lines {
		switch {
		case cur == nil && l.fence == "" && (strings.HasPrefix(strings.TrimSpace(l.text), "```") || strings.HasPrefix(strings.TrimSpace(l.text), "~~~")):
			info := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l.text), "`~"))
			cur = &block{start: l.n, info: info, mark: l.mark}
		case cur != nil && l.fence == "":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.body += l.text + "\n"
		}
	}
	return out
}

// anchors are the heading anchors GitHub makes of a document: each heading lower-cased, its
// letters, digits, spaces, hyphens and underscores kept (spaces as hyphens), the rest dropped; a
// repeated one gets -1, -2, ...
func anchors(lines []line) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines {
		if l.fence != "" {
			continue
		}
		t := strings.TrimSpace(l.text)
		level := len(t) - len(strings.TrimLeft(t, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(t[level:], " ") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(t[level:]), "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func readDoc(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
