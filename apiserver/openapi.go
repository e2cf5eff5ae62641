package apiserver

import _ "embed" // for OpenAPIDocument

// OpenAPIDocument is the OpenAPI 3.0.3 document (YAML) of the public /api/v1 API: every
// operation of the API contract (docs/architecture.md §2) plus the pmx additions, with the exact
// statuses each one answers. Its server URL is the relative "/api/v1". internal/apitest validates
// real responses against it in tests.
//
//go:embed openapi.yaml
var OpenAPIDocument []byte

// AsyncAPIDocument is the AsyncAPI 3 document (YAML) of the live feed, GET /api/v1/ws: the
// client's messages and the server's, and the close codes. internal/apitest validates every
// message the tests receive against it.
//
//go:embed asyncapi.yaml
var AsyncAPIDocument []byte

// AdminOpenAPIDocument is the OpenAPI 3.0.3 document (YAML) of the admin API, /admin/v1: its
// own document, since it has another credential, server URL and audience than the public API,
// whose document the SDKs are generated from. Served at /admin/v1/openapi.yaml when the admin
// API is on; internal/apitest validates the contract suite's admin answers against it.
//
//go:embed admin-openapi.yaml
var AdminOpenAPIDocument []byte
