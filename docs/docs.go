// Package docs embeds the documents the server serves: the OpenAPI
// contract of the HTTP API (openapi.yaml, served at GET
// /api/v1/openapi.yaml). The rest of this directory is prose for people.
package docs

import _ "embed"

// OpenAPI is openapi.yaml, the OpenAPI 3.1 contract of the HTTP API.
//
//go:embed openapi.yaml
var OpenAPI []byte
