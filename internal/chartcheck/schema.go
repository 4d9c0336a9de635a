package chartcheck

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// schemaURL is the name Helm gives a chart's values.schema.json when it compiles it; the
// error texts (and parseSchemaError) depend on it.
const schemaURL = "file:///values.schema.json"

// compiledSchema is a chart's values schema compiled once. Helm compiles it again for
// every render (chartutil.ValidateAgainstSingleSchema), which dominated verifying a
// large fleet.
type compiledSchema struct {
	once      sync.Once
	validator *jsonschema.Schema
	err       error
}

// schemas caches compiled schemas by chart (a chart loaded once per version).
var schemas sync.Map // *chart.Chart → *compiledSchema

// renderValues composes the values a chart's templates see, validating them against
// the chart's schema as Helm does, with the schema compiled once per chart. The error
// text is Helm's. A chart with subcharts is left to Helm's own validation.
func renderValues(ch *chart.Chart, values map[string]any, opts chartutil.ReleaseOptions) (chartutil.Values, error) {
	if len(ch.Dependencies()) > 0 || ch.Schema == nil {
		return chartutil.ToRenderValues(ch, values, opts, chartutil.DefaultCapabilities)
	}
	rv, err := chartutil.ToRenderValuesWithSchemaValidation(ch, values, opts, chartutil.DefaultCapabilities, true)
	if err != nil {
		return rv, err
	}
	vals, _ := rv["Values"].(chartutil.Values)
	return rv, validateValues(ch, vals.AsMap())
}

// validateValues validates coalesced values against the chart's schema, compiled once
// per chart (the chart must have one). The error text is Helm's.
func validateValues(ch *chart.Chart, vals map[string]any) error {
	v, _ := schemas.LoadOrStore(ch, &compiledSchema{})
	s := v.(*compiledSchema)
	s.once.Do(func() { s.validator, s.err = compileSchema(ch.Schema) })
	if s.err != nil {
		return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n%w", ch.Name(), s.err)
	}
	if err := s.validator.Validate(vals); err != nil {
		// As chartutil.JSONSchemaValidationError prints it: Helm's own error text, word
		// for word, its ending included.
		text := strings.TrimPrefix(err.Error(), "jsonschema validation failed with '"+schemaURL+"#'\n")
		return fmt.Errorf("values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n%s\n", ch.Name(), text) //nolint:staticcheck // ST1005: Helm's text
	}
	return nil
}

// compileSchema compiles a values schema. Unlike Helm it loads no reference from the
// network or the disk: verification runs offline, and a module chart's schema is whole.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{"file": refuseLoader{}, "http": refuseLoader{}, "https": refuseLoader{}, "urn": refuseLoader{}})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, errors.New("values.schema.json refers to " + url + ": module chart schemas must be self-contained")
}
