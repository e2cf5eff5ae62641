package apiserver

import _ "embed" // for OpenAPIDocument

// OpenAPIDocument is the OpenAPI 3.0.3 document (YAML) of the public /api/v1 API: every
// operation of the contract in API-SPEC.md plus the pmx additions, with the exact statuses each
// one answers. Its server URL is the relative "/api/v1". internal/apitest validates real
// responses against it in tests.
//
//go:embed openapi.yaml
var OpenAPIDocument []byte
