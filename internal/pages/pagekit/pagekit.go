// Package pagekit is the page machinery that pmx's two sets of server-rendered pages share, the
// developer settings (package settings) and the public market pages (package marketpages):
//   - static files (stylesheets, scripts) kept in memory and linked under URLs that carry a hash
//     of their content, so that they can be cached for a day and a new build is still fetched at
//     once; served with their content type;
//   - templates, each page parsed with the set's layout, given a FuncMap that holds "static" (a
//     static file's URL) and "when" (a time as both sets show one) beside the set's own funcs, and
//     rendered whole before a byte is sent.
//
// What differs between the sets (their headers, their funcs, what a failed render answers) stays
// in their packages.
package pagekit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/gin-gonic/gin"
)

// layout is the template every page is parsed with; it defines "layout", from which a page is
// executed, and which a page's template fills (with a "content" block, say).
const layout = "templates/layout.html"

// Pages is a set of pages: their templates and the static files they link to.
type Pages struct {
	templates map[string]*template.Template // by file name, "list.html"
	static    map[string]staticFile         // by file name, "pages.css"
}

type staticFile struct {
	body        []byte
	contentType string
	url         string // with a content hash, so that it can be cached for long
}

// New reads a set of pages from files: the static files static/*, linked under staticURL (the
// path ServeStatic is routed at, ending in "/": "/settings/static/"), and a template for each
// templates/*.html but the layout, parsed with templates/layout.html and funcs, to which New adds
// "static" and "when" (funcs may not name them).
func New(files fs.FS, staticURL string, funcs template.FuncMap) (*Pages, error) {
	p := &Pages{templates: map[string]*template.Template{}, static: map[string]staticFile{}}
	names, err := fs.Glob(files, "static/*")
	if err != nil {
		return nil, err
	}
	for _, f := range names {
		body, err := fs.ReadFile(files, f)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(body)
		name := path.Base(f)
		p.static[name] = staticFile{body: body, contentType: mime.TypeByExtension(path.Ext(name)),
			url: staticURL + name + "?v=" + hex.EncodeToString(sum[:6])}
	}
	all := template.FuncMap{"static": p.staticURL, "when": when}
	for name, f := range funcs {
		if _, ok := all[name]; ok {
			return nil, fmt.Errorf("pagekit: the func %q is pagekit's own", name)
		}
		all[name] = f
	}
	names, err = fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, f := range names {
		if f == layout {
			continue
		}
		name := path.Base(f)
		t, err := template.New(name).Funcs(all).ParseFS(files, layout, f)
		if err != nil {
			return nil, fmt.Errorf("pagekit: %s: %w", name, err)
		}
		p.templates[name] = t
	}
	return p, nil
}

// staticURL is the "static" template func: a static file's URL, with its content hash.
func (p *Pages) staticURL(name string) (string, error) {
	f, ok := p.static[name]
	if !ok {
		return "", fmt.Errorf("no static file %q", name)
	}
	return f.url, nil
}

// Render answers with the page name (its file name, "message.html") given data, executed from
// its layout. The page is rendered whole first, so that a template error cannot send half of
// one: on an error nothing is written, and the caller answers as it sees fit.
func (p *Pages) Render(c *gin.Context, status int, name string, data any) error {
	t, ok := p.templates[name]
	if !ok {
		return fmt.Errorf("pagekit: no page %q", name)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		return err
	}
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
	return nil
}

// ServeStatic serves the static file that the route's parameter "file" names, with its content
// type, cacheable by anyone for a day (its URL changes with its content); 404 for none.
func (p *Pages) ServeStatic(c *gin.Context) {
	f, ok := p.static[c.Param("file")]
	if !ok {
		c.String(http.StatusNotFound, "not found\n")
		return
	}
	c.Header("X-Content-Type-Options", "nosniff")
	c.Header("Cache-Control", "public, max-age=86400")
	c.Data(http.StatusOK, f.contentType, f.body)
}

// when shows a time in UTC, to the minute; "—" for none.
func when(t any) string {
	switch t := t.(type) {
	case time.Time:
		return t.UTC().Format("2 Jan 2006 15:04 UTC")
	case *time.Time:
		if t == nil {
			return "—"
		}
		return t.UTC().Format("2 Jan 2006 15:04 UTC")
	}
	return fmt.Sprint(t)
}
