package v1alpha1

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// LoadMarkets reads the Market manifests in dir, the same YAML that `kubectl apply -f dir` takes,
// for the standalone exchange, which has no apiserver to validate and default them.
//
// It reads every *.yaml and *.yml file directly in dir, in file name order, each holding one or
// more documents separated by `---` lines; empty documents are skipped. Kustomize's own files
// (kustomization.yaml, kustomization.yml, Kustomization), dot files and subdirectories are ignored.
// Every other document must be a pmx.dev/v1alpha1 Market with a metadata.name, no field the type
// does not know, and a spec that the CRD would accept; each is checked offline against the rules
// of the CRD schema (required fields, lengths, enums, url, closesAt before resolvesAt) and
// defaulted as the CRD defaults it (labelA "Yes", labelB "No"). A status in a manifest is
// dropped, as the apiserver drops it. Two documents naming the same market are an error.
//
// The markets come back in file name order, then document order. On any problem LoadMarkets
// returns no markets and an error with one line per problem, each naming the file, the document
// and the field.
func LoadMarkets(dir string) ([]Market, error) {
	if _, err := os.ReadDir(dir); err != nil {
		return nil, fmt.Errorf("while reading market manifests: %w", err)
	}
	return LoadMarketsFS(os.DirFS(dir), dir)
}

// LoadMarketsFS is LoadMarkets on the top folder of fsys (such as the sample markets built into
// pmx, package config); dir names that folder in messages.
func LoadMarketsFS(fsys fs.FS, dir string) ([]Market, error) {
	return loadManifests(fsys, dir, "market", decodeMarket)
}

// manifest is what loadManifests needs of a kind: a pointer to it, with its name and namespace.
type manifest[T any] interface {
	*T
	GetName() string
	GetNamespace() string
}

// loadManifests reads the manifests on the top folder of fsys as LoadMarketsFS documents it, for
// one kind (noun names it in messages): every manifest file in file name order, each document
// decoded by decode (nil and no problems: an empty document; an object with problems: its name
// says where they are), two objects of one namespace and name refused. dir names the folder in
// messages.
func loadManifests[T any, P manifest[T]](fsys fs.FS, dir, noun string, decode func(doc []byte) (P, []error)) ([]T, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("while reading %s manifests: %w", noun, err)
	}
	objects := []T{}
	var errs []error
	seen := map[string]string{} // namespace/name -> where it was first defined
	for _, e := range entries {
		if !isManifest(e) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		docs, err := readDocuments(fsys, e.Name())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		for i, doc := range docs {
			where := fmt.Sprintf("%s: document %d", path, i+1)
			obj, problems := decode(doc)
			if obj == nil && problems == nil {
				continue // an empty document
			}
			if obj != nil && obj.GetName() != "" {
				where = fmt.Sprintf("%s (%s %q)", where, noun, obj.GetName())
			}
			for _, p := range problems {
				errs = append(errs, fmt.Errorf("%s: %w", where, p))
			}
			if len(problems) > 0 {
				continue
			}
			key := cmp.Or(obj.GetNamespace(), "default") + "/" + obj.GetName()
			if first, dup := seen[key]; dup {
				errs = append(errs, fmt.Errorf("%s: metadata.name: %s %s is already defined in %s", where, noun, key, first))
				continue
			}
			seen[key] = where
			objects = append(objects, *obj)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return objects, nil
}

// isManifest reports whether a directory entry is a YAML file that LoadMarkets reads.
func isManifest(e fs.DirEntry) bool {
	name := e.Name()
	if e.IsDir() || strings.HasPrefix(name, ".") {
		return false
	}
	switch name {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return false
	}
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".yaml" || ext == ".yml"
}

// readDocuments splits a YAML file into its `---` separated documents.
func readDocuments(fsys fs.FS, name string) ([][]byte, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
}

// decodeMarket decodes one document as kubectl and the apiserver would: YAML 1.1 (an unquoted YES
// is a boolean), JSON field names matched case-sensitively, unknown and duplicate fields refused.
// It checks the kind, applies the CRD's defaults and drops the status. It returns nil and no
// problems for an empty document (only comments, say), and a Market holding at least the name
// whenever the document is an object of the right kind; the Market is complete only when there
// are no problems, the CRD's rules (problems) included.
func decodeMarket(doc []byte) (*Market, []error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, []error{err}
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(js, &obj); err != nil {
		return nil, []error{errors.New("not a Kubernetes object: the document is not a mapping")}
	}
	var apiVersion, kind string
	var meta struct {
		Name string `json:"name"`
	}
	// Wrong types are left for the typed decoding below to report, with their field.
	_ = json.Unmarshal(obj["apiVersion"], &apiVersion)
	_ = json.Unmarshal(obj["kind"], &kind)
	_ = json.Unmarshal(obj["metadata"], &meta)
	if apiVersion != GroupVersion.String() || kind != "Market" {
		return nil, []error{fmt.Errorf("apiVersion %q, kind %q: only %s Market objects are allowed", apiVersion, kind, GroupVersion)}
	}
	m := &Market{}
	m.Name = meta.Name
	if problems := specValueProblems(obj["spec"]); len(problems) > 0 {
		return m, problems
	}
	strict, err := kjson.UnmarshalStrict(js, m, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return m, []error{err}
	}
	if len(strict) > 0 {
		return m, strict
	}
	m.Default()
	m.Status = MarketStatus{}
	return m, m.problems()
}

// specValueProblems finds the values of spec that the CRD rejects but that a typed Market cannot
// show or would report without the field's name: an empty string where the CRD wants a non-empty
// one (the Go type cannot tell it from an absent field), a boolean where it wants a string (YAML
// reads unquoted yes, no, on and off as booleans), a fee schedule without one of its rates (taken
// as 0 otherwise), and a malformed date-time.
func specValueProblems(spec json.RawMessage) []error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(spec, &fields) != nil {
		return nil // not an object: the typed decoding reports it
	}
	var problems []error
	for _, name := range []string{"question", "description", "category", "url", "labelA", "labelB", "resolution", "closesAt", "resolvesAt"} {
		raw, ok := fields[name]
		if !ok {
			continue
		}
		switch v := strings.TrimSpace(string(raw)); {
		case v == `""` && name != "description" && name != "question" && name != "category":
			// An empty question or category is reported as missing, with the other rules.
			problems = append(problems, fmt.Errorf("spec.%s: must not be empty (leave it out instead)", name))
		case v == "true" || v == "false":
			problems = append(problems, fmt.Errorf("spec.%s: is the boolean %s, not a string: quote the value (YAML reads an unquoted yes, no, on or off as a boolean)", name, v))
		}
	}
	// A fee schedule needs both rates, which the typed decoding would take as 0 when absent.
	var fees map[string]json.RawMessage
	if json.Unmarshal(fields["fees"], &fees) == nil && fees != nil {
		for _, name := range []string{"takerBps", "makerBps"} {
			if _, ok := fees[name]; !ok {
				problems = append(problems, fmt.Errorf("spec.fees.%s: required when fees is given (give both takerBps and makerBps, or leave fees out)", name))
			}
		}
	}
	for _, name := range []string{"closesAt", "resolvesAt"} {
		var v string
		if json.Unmarshal(fields[name], &v) != nil || v == "" {
			continue
		}
		if _, err := time.Parse(time.RFC3339, v); err != nil {
			problems = append(problems, fmt.Errorf("spec.%s: %q: must be an RFC 3339 date-time such as 2027-06-01T18:00:00Z", name, v))
		}
	}
	return problems
}

// LoadEventsFS reads the Event manifests on the top folder of fsys (such as the sample event built
// into pmx, package config) as LoadMarketsFS reads Markets: every *.yaml and *.yml file, in file
// name order, each document a pmx.dev/v1alpha1 Event with a metadata.name and no field the type
// does not know; a status is dropped. dir names the folder in messages. It checks no more than
// that: the event's rules (its outcomes, each outcome's market) are eventrec.Validate's, which
// recording the event applies.
func LoadEventsFS(fsys fs.FS, dir string) ([]Event, error) {
	return loadManifests(fsys, dir, "event", decodeEvent)
}

// decodeEvent decodes one document as decodeMarket does, for an Event: nil and no problems for
// an empty document.
func decodeEvent(doc []byte) (*Event, []error) {
	ev, problems := decodeObject[Event](doc, "Event")
	if ev != nil {
		ev.Status = EventStatus{}
	}
	return ev, problems
}

// LoadSeriesFS reads the MarketSeries manifests on the top folder of fsys (such as the sample
// series built into pmx, package config) as LoadEventsFS reads Events. It checks no more than
// that: a series' rules (its schedule, zone and template) are internal/series' (series.New).
func LoadSeriesFS(fsys fs.FS, dir string) ([]MarketSeries, error) {
	return loadManifests(fsys, dir, "series", decodeSeries)
}

// decodeSeries decodes one document as decodeEvent does, for a MarketSeries.
func decodeSeries(doc []byte) (*MarketSeries, []error) {
	ms, problems := decodeObject[MarketSeries](doc, "MarketSeries")
	if ms != nil {
		ms.Status = MarketSeriesStatus{}
	}
	return ms, problems
}

// decodeObject decodes one document of kind strictly (no unknown or duplicate field), with a
// metadata.name: nil and no problems for an empty document, nil and problems for anything else
// wrong.
func decodeObject[T any, P manifest[T]](doc []byte, kind string) (P, []error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, []error{err}
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	_ = json.Unmarshal(js, &head)
	if head.APIVersion != GroupVersion.String() || head.Kind != kind {
		return nil, []error{fmt.Errorf("apiVersion %q, kind %q: only %s %s objects are allowed", head.APIVersion, head.Kind, GroupVersion, kind)}
	}
	obj := P(new(T))
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, []error{err}
	}
	if len(strict) > 0 {
		return nil, strict
	}
	if obj.GetName() == "" {
		return nil, []error{fmt.Errorf("metadata.name: every %s needs a name", kind)}
	}
	return obj, nil
}
