package transport_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	validationErrors "github.com/pb33f/libopenapi-validator/errors"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/conclave-ai/conclave/docs"
)

// openAPI is docs/openapi.yaml loaded, checked against the OpenAPI 3.1
// meta-schema, and a validator of requests and answers against it.
type openAPI struct {
	model *v3.Document
	v     validator.Validator
}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	doc, err := libopenapi.NewDocument(docs.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetVersion(); v != "3.1.0" {
		t.Fatalf("docs/openapi.yaml is OpenAPI %s, want 3.1.0", v)
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("docs/openapi.yaml: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("docs/openapi.yaml is not a valid OpenAPI 3.1 document:%s", describe(verrs))
	}
	return &openAPI{model: &m.Model, v: v}
}

func TestOpenAPI_Document(t *testing.T) {
	t.Parallel()
	loadOpenAPI(t)
}

// describe lists validation errors, one a line, with the schema failures
// under each.
func describe(errs []*validationErrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  %s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n    %s %s: %s", se.KeywordLocation, se.FieldPath, se.Reason)
		}
	}
	return b.String()
}
