package doctest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A Markdown link or image: [text](target) or [text](target "title").
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestLinks checks every relative link of README.md and docs/*.md: its file exists, inside the
// repository, and its #anchor, if any, is a heading of that file.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	heads := map[string]map[string]bool{} // by file, relative to root
	headsOf := func(rel string) map[string]bool {
		if h, ok := heads[rel]; ok {
			return h
		}
		heads[rel] = anchors(parse(readDoc(t, root, rel)))
		return heads[rel]
	}
	checked := 0
	for _, doc := range docFiles(t, root) {
		for _, l := range parse(readDoc(t, root, doc)) {
			if l.fence != "" {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(withoutCode(l.text), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := doc + ":" + strconv.Itoa(l.n) + ": " + target
				path, anchor, _ := strings.Cut(target, "#")
				rel := doc
				if path != "" {
					rel = filepath.Join(filepath.Dir(doc), path)
				}
				if rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
					t.Errorf("%s: points outside the repository", where)
					continue
				}
				info, err := os.Stat(filepath.Join(root, rel))
				if err != nil {
					t.Errorf("%s: no such file (%s)", where, rel)
					continue
				}
				if anchor == "" {
					continue
				}
				if info.IsDir() || !strings.HasSuffix(rel, ".md") {
					t.Errorf("%s: an anchor on what is not a Markdown file", where)
					continue
				}
				if !headsOf(rel)[anchor] {
					t.Errorf("%s: %s has no heading whose anchor is #%s", where, rel, anchor)
				}
			}
		}
	}
	t.Logf("%d relative links checked", checked)
	if checked < 20 {
		t.Fatalf("only %d relative links found: is the parser broken?", checked)
	}
}

// The repository's top folders whose paths the docs name.
var repoPath = regexp.MustCompile(`(?:^|[\s=(,'"\x60])(?:\./)?((?:\.ci|api|apiserver|charts|client|clients|cmd|config|controllers|docs|engine|examples|hack|internal)/[A-Za-z0-9_.\-/*]*)`)

// notOurs are paths the docs name in other repositories, each with where it is.
var notOurs = map[string]string{
	"config/default": "CloudNativePG's kustomization, in its own repository (docs/operations.md)",
}

// inlineCode is a code span on one line.
var inlineCode = regexp.MustCompile("`[^`]+`")

// TestPathsNamed checks that every path in the repository that README.md and docs/*.md name in
// code — a code span, or a shell block's line — exists.
func TestPathsNamed(t *testing.T) {
	root := repoRoot(t)
	checked := 0
	for _, doc := range docFiles(t, root) {
		for _, l := range parse(readDoc(t, root, doc)) {
			var code []string
			switch l.fence {
			case "":
				code = inlineCode.FindAllString(l.text, -1)
			case "sh", "bash", "console", "shell":
				code = []string{l.text}
			default:
				continue
			}
			for _, c := range code {
				for _, m := range repoPath.FindAllStringSubmatch(c, -1) {
					p := strings.TrimRight(m[1], ".,:;")
					checked++
					if notOurs[p] != "" {
						continue
					}
					if strings.Contains(p, "*") {
						if found, _ := filepath.Glob(filepath.Join(root, p)); len(found) == 0 {
							t.Errorf("%s:%d: names %s, which matches nothing", doc, l.n, p)
						}
						continue
					}
					if _, err := os.Stat(filepath.Join(root, p)); err != nil {
						t.Errorf("%s:%d: names %s, which does not exist", doc, l.n, p)
					}
				}
			}
		}
	}
	t.Logf("%d paths checked", checked)
	if checked < 50 {
		t.Fatalf("only %d paths found: is the parser broken?", checked)
	}
}

// withoutCode blanks a line's code spans, whose brackets are no links.
func withoutCode(s string) string {
	return inlineCode.ReplaceAllStringFunc(s, func(c string) string { return strings.Repeat(" ", len(c)) })
}
