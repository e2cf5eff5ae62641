package apitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	// santhosh-tekuri/jsonschema: a maintained, complete JSON Schema validator (drafts 4 to
	// 2020-12, formats included); AsyncAPI 3 payloads are JSON Schema. kin-openapi, which
	// checks the REST side, reads OpenAPI's dialect only.
	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/pmx-dev/pmx/apiserver"
)

// AsyncValidator checks WebSocket feed messages against the AsyncAPI document
// (apiserver.AsyncAPIDocument): each message a client sends or receives must be one of the
// messages its operation lists, chosen by the message's "op" (client) or "type" (server). It
// records which server message types were seen, for a suite to assert it saw them all. Safe for
// concurrent use.
type AsyncValidator struct {
	client, server map[string]*jsonschema.Schema // by op, by type
	closeCodes     []int
	security       map[string][]SecurityScheme // by channel address

	mu   sync.Mutex
	seen map[string]bool
}

// NewAsyncValidator loads apiserver.AsyncAPIDocument; it fails t if the document is unusable.
func NewAsyncValidator(t testing.TB) *AsyncValidator {
	t.Helper()
	v, err := NewAsyncFromDocument(apiserver.AsyncAPIDocument)
	if err != nil {
		t.Fatalf("the AsyncAPI document: %v", err)
	}
	return v
}

// SecurityScheme is a credential a channel's connection may present (one of those its operations
// list), as the document's components.securitySchemes declares it.
type SecurityScheme struct {
	Name   string `json:"-"`
	Type   string `json:"type"`   // http, httpApiKey, ...
	Scheme string `json:"scheme"` // http: bearer
	In     string `json:"in"`     // httpApiKey: query, header, cookie
	Param  string `json:"name"`   // httpApiKey: the parameter's name
}

type ref struct {
	Ref string `json:"$ref"`
}

// asyncDoc is what the validator reads of an AsyncAPI 3 document.
type asyncDoc struct {
	AsyncAPI string `json:"asyncapi"`
	Info     struct {
		CloseCodes []struct {
			Code int    `json:"code"`
			Name string `json:"name"`
		} `json:"x-close-codes"`
	} `json:"info"`
	Channels map[string]struct {
		Address string `json:"address"`
	} `json:"channels"`
	Operations map[string]struct {
		Action   string `json:"action"`
		Channel  ref    `json:"channel"`
		Messages []ref  `json:"messages"`
		Security *[]ref `json:"security"`
	} `json:"operations"`
	Components struct {
		Messages map[string]struct {
			Payload ref `json:"payload"`
		} `json:"messages"`
		SecuritySchemes map[string]SecurityScheme `json:"securitySchemes"`
	} `json:"components"`
}

// NewAsyncFromDocument builds a validator from an AsyncAPI 3 document (YAML or JSON).
func NewAsyncFromDocument(data []byte) (*AsyncValidator, error) {
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var doc asyncDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(doc.AsyncAPI, "3.") {
		return nil, fmt.Errorf("asyncapi %q: want a 3.x document", doc.AsyncAPI)
	}
	whole, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const url = "asyncapi.json"
	if err := c.AddResource(url, whole); err != nil {
		return nil, err
	}
	v := &AsyncValidator{client: map[string]*jsonschema.Schema{}, server: map[string]*jsonschema.Schema{},
		security: map[string][]SecurityScheme{}, seen: map[string]bool{}}
	for _, cc := range doc.Info.CloseCodes {
		v.closeCodes = append(v.closeCodes, cc.Code)
	}
	for name, op := range doc.Operations {
		into, field := v.server, "type"
		switch op.Action {
		case "receive": // the server receives what clients send
			into, field = v.client, "op"
		case "send":
		default:
			return nil, fmt.Errorf("operation %s: action %q", name, op.Action)
		}
		if err := v.readSecurity(&doc, name); err != nil {
			return nil, err
		}
		for _, m := range op.Messages {
			// #/channels/feed/messages/NAME → the channel's $ref → #/components/messages/NAME
			msgName := m.Ref[strings.LastIndex(m.Ref, "/")+1:]
			comp, ok := doc.Components.Messages[msgName]
			if !ok || !strings.HasPrefix(comp.Payload.Ref, "#/") {
				return nil, fmt.Errorf("operation %s: message %s has no payload schema", name, m.Ref)
			}
			s, err := c.Compile(url + comp.Payload.Ref)
			if err != nil {
				return nil, fmt.Errorf("message %s: %w", msgName, err)
			}
			// The discriminating field's values: a const or an enum of the payload's schema.
			keys, err := discriminators(raw, comp.Payload.Ref, field)
			if err != nil {
				return nil, fmt.Errorf("message %s: %w", msgName, err)
			}
			for _, k := range keys {
				into[k] = s
			}
		}
	}
	if len(v.client) == 0 || len(v.server) == 0 {
		return nil, errors.New("the document lists no client or no server messages")
	}
	return v, nil
}

// readSecurity records the credentials an operation takes, by its channel's address. Every
// operation must say (an empty list: none), each scheme must be declared, and the operations of
// one channel must agree, since they share its connection.
func (v *AsyncValidator) readSecurity(doc *asyncDoc, name string) error {
	op := doc.Operations[name]
	channel, ok := doc.Channels[strings.TrimPrefix(op.Channel.Ref, "#/channels/")]
	if !ok || channel.Address == "" {
		return fmt.Errorf("operation %s: channel %q has no address", name, op.Channel.Ref)
	}
	if op.Security == nil {
		return fmt.Errorf("operation %s: no security (an empty list when it takes no credential)", name)
	}
	schemes := []SecurityScheme{}
	for _, r := range *op.Security {
		schemeName, ok := strings.CutPrefix(r.Ref, "#/components/securitySchemes/")
		s, declared := doc.Components.SecuritySchemes[schemeName]
		if !ok || !declared {
			return fmt.Errorf("operation %s: security %q is not a declared scheme", name, r.Ref)
		}
		s.Name = schemeName
		schemes = append(schemes, s)
	}
	if prior, ok := v.security[channel.Address]; ok && !slices.Equal(prior, schemes) {
		return fmt.Errorf("operation %s: its security differs from another operation's of %s", name, channel.Address)
	}
	v.security[channel.Address] = schemes
	return nil
}

// Security returns the credentials a connection to the channel at address may present, any one
// of them (none: the channel is open), and whether the document has that channel.
func (v *AsyncValidator) Security(address string) ([]SecurityScheme, bool) {
	s, ok := v.security[address]
	return slices.Clone(s), ok
}

// discriminators reads the const or enum of a schema's property.
func discriminators(doc []byte, ref, field string) ([]string, error) {
	var node any
	if err := json.Unmarshal(doc, &node); err != nil {
		return nil, err
	}
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := node.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: no %s", ref, part)
		}
		node = m[part]
	}
	props, _ := node.(map[string]any)["properties"].(map[string]any)
	p, _ := props[field].(map[string]any)
	if c, ok := p["const"].(string); ok {
		return []string{c}, nil
	}
	var out []string
	for _, e := range p["enum"].([]any) {
		out = append(out, e.(string))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: property %s has no const nor enum", ref, field)
	}
	return out, nil
}

// ValidateServer checks a message the server sent.
func (v *AsyncValidator) ValidateServer(raw []byte) error {
	typ, err := v.validate(v.server, "type", raw)
	if err == nil {
		v.mu.Lock()
		v.seen[typ] = true
		v.mu.Unlock()
	}
	return err
}

// ValidateClient checks a message a client sends.
func (v *AsyncValidator) ValidateClient(raw []byte) error {
	_, err := v.validate(v.client, "op", raw)
	return err
}

func (v *AsyncValidator) validate(by map[string]*jsonschema.Schema, field string, raw []byte) (string, error) {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return "", fmt.Errorf("not JSON: %w: %s", err, shorten(raw, 200))
	}
	obj, _ := inst.(map[string]any)
	name, _ := obj[field].(string)
	s, ok := by[name]
	if !ok {
		return "", fmt.Errorf("%s %q is not documented: %s", field, name, shorten(raw, 200))
	}
	if err := s.Validate(inst); err != nil {
		return "", fmt.Errorf("%s %q breaks the AsyncAPI document: %v: %s", field, name, err, shorten(raw, 300))
	}
	return name, nil
}

// CloseCodeDocumented says whether an application close code (4000–4999) is in the document.
func (v *AsyncValidator) CloseCodeDocumented(code int) bool {
	return slices.Contains(v.closeCodes, code)
}

// ServerTypes lists the documented server message types, sorted.
func (v *AsyncValidator) ServerTypes() []string {
	var out []string
	for k := range v.server {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Seen lists the server message types validated so far, sorted.
func (v *AsyncValidator) Seen() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for k := range v.seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
