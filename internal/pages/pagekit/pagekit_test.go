package pagekit

import (
	"crypto/sha256"
	"encoding/hex"
	"html/template"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gin-gonic/gin"
)

func init() { gin.SetMode(gin.TestMode) }

const layoutHTML = `{{define "layout"}}<html><title>{{.Title}}</title>` +
	`<link href="{{static "style.css"}}">{{template "content" .}}</html>{{end}}`

// site is a set of pages' files: a layout, the pages given and two static files.
func site(css string, pages map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{
		"templates/layout.html": {Data: []byte(layoutHTML)},
		"static/style.css":      {Data: []byte(css)},
		"static/app.js":         {Data: []byte("console.log(1)")},
	}
	for name, text := range pages {
		fsys["templates/"+name] = &fstest.MapFile{Data: []byte(text)}
	}
	return fsys
}

func mustNew(t *testing.T, fsys fstest.MapFS, funcs template.FuncMap) *Pages {
	t.Helper()
	p, err := New(fsys, "/s/", funcs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// render renders a page as Render answers it: its status, content type and body, or its error.
func render(t *testing.T, p *Pages, name string, data any) (int, string, string, error) {
	t.Helper()
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	err := p.Render(c, http.StatusTeapot, name, data)
	if err != nil && c.Writer.Written() {
		t.Errorf("Render(%s) failed and still wrote %d %q", name, w.Code, w.Body.String())
	}
	return w.Code, w.Header().Get("Content-Type"), w.Body.String(), err
}

func hashURL(name, content string) string {
	sum := sha256.Sum256([]byte(content))
	return "/s/" + name + "?v=" + hex.EncodeToString(sum[:6])
}

func TestStaticURL(t *testing.T) {
	page := map[string]string{"p.html": `{{define "content"}} {{static "app.js"}}{{end}}`}
	link := regexp.MustCompile(`href="([^"]*)"> (\S*)</html>`)
	type urls struct{ css, js string }
	seen := map[string]urls{}
	for _, tc := range []struct {
		name, css string
	}{
		{"v1", "body { color: red }"},
		{"v2", "body { color: blue }"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, body, err := render(t, mustNew(t, site(tc.css, page), nil), "p.html", nil)
			if err != nil {
				t.Fatal(err)
			}
			m := link.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no links in\n%s", body)
			}
			got := urls{css: m[1], js: m[2]}
			if want := (urls{css: hashURL("style.css", tc.css), js: hashURL("app.js", "console.log(1)")}); got != want {
				t.Errorf("links %+v, want %+v", got, want)
			}
			seen[tc.name] = got
		})
	}
	if seen["v1"].css == seen["v2"].css {
		t.Errorf("the stylesheet's URL %s did not change with its content", seen["v1"].css)
	}
	if seen["v1"].js != seen["v2"].js {
		t.Errorf("the script's URL changed (%s, %s) though its content did not", seen["v1"].js, seen["v2"].js)
	}
}

func TestServeStatic(t *testing.T) {
	p := mustNew(t, site("body {}", nil), nil)
	r := gin.New()
	r.GET("/s/:file", p.ServeStatic)
	for _, tc := range []struct {
		file, wantType, wantCache, wantBody string
		wantStatus                          int
	}{
		{"style.css", "text/css; charset=utf-8", "public, max-age=86400", "body {}", http.StatusOK},
		{"app.js", "text/javascript; charset=utf-8", "public, max-age=86400", "console.log(1)", http.StatusOK},
		{"nothing.js", "text/plain; charset=utf-8", "", "not found\n", http.StatusNotFound},
		{"layout.html", "text/plain; charset=utf-8", "", "not found\n", http.StatusNotFound}, // a template is no static file
	} {
		t.Run(tc.file, func(t *testing.T) {
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/s/"+tc.file+"?v=0123456789ab", nil))
			h := w.Header()
			if w.Code != tc.wantStatus || h.Get("Content-Type") != tc.wantType || h.Get("Cache-Control") != tc.wantCache ||
				w.Body.String() != tc.wantBody {
				t.Errorf("GET /s/%s: %d, Content-Type %q, Cache-Control %q, %q; want %d, %q, %q, %q", tc.file,
					w.Code, h.Get("Content-Type"), h.Get("Cache-Control"), w.Body.String(),
					tc.wantStatus, tc.wantType, tc.wantCache, tc.wantBody)
			}
			if w.Code == http.StatusOK && h.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET /s/%s: X-Content-Type-Options %q, want nosniff", tc.file, h.Get("X-Content-Type-Options"))
			}
		})
	}
}

func TestRender(t *testing.T) {
	at := time.Date(2024, 3, 5, 7, 9, 11, 0, time.FixedZone("CET", 3600))
	var none *time.Time
	css := "body {}"
	pages := map[string]string{
		"hello.html":  `{{define "content"}}<p>{{.Body}}</p>{{end}}`,
		"funcs.html":  `{{define "content"}}{{shout .Body}} {{when .At}} {{when .AtPtr}} [{{when .None}}]{{end}}`,
		"broken.html": `{{define "content"}}<img src="{{static "nothing.png"}}">{{end}}`,
	}
	type data struct {
		Title, Body string
		At          time.Time
		AtPtr       *time.Time
		None        *time.Time
	}
	p := mustNew(t, site(css, pages), template.FuncMap{"shout": strings.ToUpper})
	head := `<html><title>T &amp; t</title><link href="` + hashURL("style.css", css) + `">`
	for _, tc := range []struct {
		page    string
		want    string // the whole body
		wantErr string // or the error
	}{
		{page: "hello.html", want: head + "<p>&lt;b&gt;hi&lt;/b&gt;</p></html>"},
		{page: "funcs.html", want: head + "&lt;B&gt;HI&lt;/B&gt; 5 Mar 2024 06:09 UTC 5 Mar 2024 06:09 UTC [—]</html>"},
		{page: "broken.html", wantErr: `no static file "nothing.png"`},
		{page: "nothing.html", wantErr: `no page "nothing.html"`},
		{page: "layout.html", wantErr: `no page "layout.html"`}, // the layout is no page of its own
	} {
		t.Run(tc.page, func(t *testing.T) {
			status, ctype, body, err := render(t, p, tc.page, data{Title: "T & t", Body: "<b>hi</b>", At: at, AtPtr: &at, None: none})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Render(%s): %v, want an error with %q", tc.page, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if status != http.StatusTeapot || ctype != "text/html; charset=utf-8" || body != tc.want {
				t.Errorf("Render(%s): %d %q\n%s\nwant %d text/html\n%s", tc.page, status, ctype, body, http.StatusTeapot, tc.want)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fsys  fstest.MapFS
		funcs template.FuncMap
		want  string
	}{
		{"a func of pagekit's", site("", nil), template.FuncMap{"static": strings.ToUpper}, `"static" is pagekit's own`},
		{"a page that does not parse", site("", map[string]string{"bad.html": `{{define "content"}}{{.X`}), nil, "bad.html"},
		{"a func no one gave", site("", map[string]string{"bad.html": `{{define "content"}}{{dollars 1}}{{end}}`}), nil, `"dollars" not defined`},
		{"no layout", fstest.MapFS{"templates/p.html": {Data: []byte(`{{define "content"}}{{end}}`)}}, nil, "layout.html"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.fsys, "/s/", tc.funcs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
