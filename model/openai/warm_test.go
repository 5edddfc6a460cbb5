package openai_test

import (
	"encoding/json"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// warmEncoders marshals, once and before any test runs, every request
// shape the model sends. openai-go's JSON encoder caches an encoder per
// type, and while one is being built a concurrent user waits on a
// sync.WaitGroup. If that WaitGroup was created inside a synctest bubble
// (a parallel test of this package) and a test outside it waits on it,
// the runtime panics in synctest.IsAssociated (CI, stop 25:
// TestModel_CancelMidStream). Built here, outside every bubble and
// before any concurrency, the encoders are only read afterwards.
func warmEncoders() {
	params := oa.ChatCompletionNewParams{
		Model: "warm",
		Messages: []oa.ChatCompletionMessageParamUnion{
			oa.SystemMessage("s"),
			oa.UserMessage("u"),
			{OfAssistant: &oa.ChatCompletionAssistantMessageParam{
				Content: oa.ChatCompletionAssistantMessageParamContentUnion{OfString: oa.String("a")},
				ToolCalls: []oa.ChatCompletionMessageToolCallUnionParam{{OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
					ID: "c", Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "f", Arguments: "{}"},
				}}},
			}},
			oa.ToolMessage("r", "c"),
		},
		Tools: []oa.ChatCompletionToolUnionParam{oa.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "f", Description: oa.String("d"), Parameters: shared.FunctionParameters{"type": "object"},
		})},
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)},
		Temperature:   oa.Float(0.5),
		ResponseFormat: oa.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "n", Schema: map[string]any{"type": "object"}, Strict: oa.Bool(false)},
		}},
	}
	if _, err := json.Marshal(params); err != nil {
		panic("warm the openai-go encoders: " + err.Error())
	}
}
