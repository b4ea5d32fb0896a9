// Package openai holds, once, the messages of the OpenAI HTTP API as
// Tollgate speaks it, and their Server-Sent Events framing. Three parts of
// Tollgate speak it: the edge (edge/) reads clients' requests and writes
// their replies; the vLLM engine (server/inference/vllm) writes requests to
// a model server and reads its replies; and vllmfake, the engine's
// stand-in server, reads those requests and writes vLLM's replies.
//
// # The structs
//
// Each wire message is one struct, whichever side reads or writes it. Its
// members are typed as the wire has them:
//
//   - a pointer where a member may be absent or null and the reader must
//     tell that from a zero value ("model" needs no pointer: absent, null
//     and "" are all a missing model; a message's "role" does, since
//     missing and empty are different errors);
//   - a jsontext.Value (raw JSON) where a member has more than one JSON
//     type: a message's content (a string, an array of parts or null),
//     stop, tool_choice, an embeddings input, and the JSON Schema and
//     template arguments passed on as they are. The reader decides what the
//     value is and names the member at fault; the writer puts in the JSON
//     it made (String, or a NamedToolChoice marshalled) or was given;
//   - omitempty on every optional member of a request, so a writer sends
//     only what it sets. Decoding ignores it.
//
// Field order is wire order: encoding/json writes members in that order,
// and the edge's replies and the engine's requests are pinned byte for
// byte by their tests (edge/*_test.go, server/inference/vllm).
//
// The structs are written with encoding/json (which escapes <, > and & in
// strings: AppendString writes strings the same way), or, on the hot
// paths, by hand with the same bytes: the engine's chat request and the
// edge's plain reply (AppendJSON, each held to encoding/json's output by a
// table test and a fuzz target; change a struct and its AppendJSON
// together). They are read with
// github.com/go-json-experiment/json, whose decoding matches member names
// exactly, or with encoding/json by vllmfake. Members that are vLLM's, not
// OpenAI's (reasoning, reasoning_content, chat_template_kwargs), say so.
//
// # What each side keeps
//
// The edge keeps its reading of a request: decoding into
// ChatCompletionRequest and EmbeddingRequest, it checks each member as
// OpenAI does and answers 400 naming the member (edge/chat_request.go,
// edge/decode.go); the raw members are what let it do that. It keeps
// chunkEncoder (edge/chunk.go), which writes ChatCompletionChunk's bytes by
// hand on a stream's hot path, checked against encoding/json's output of
// the struct; and its error, which is APIError with the HTTP status.
//
// The engine keeps its reading of vLLM's error bodies, which are not
// ErrorResponse: their code is a number, an error may be a bare string, and
// FastAPI answers {"detail":...}. It keeps vLLM's own /tokenize request,
// built of this package's Message and Tool.
//
// vllmfake keeps its own request views and reply writers. It copies a
// vLLM server, not the protocol: it reads a request as vLLM's pydantic
// models do, answering a malformed member with pydantic's error type and
// location, keeping messages and tools as the client sent them for its chat
// template, and telling absent from null where vLLM does (a missing model
// is the served one; include_usage defaults to true); and it writes replies
// with vLLM's member order and extra null members, and Python's number
// formatting. Decoding into these structs would make it accept and refuse
// requests otherwise than vLLM. It shares the framing (AppendEvent, Done),
// the protocol's names (object types, roles, finish reasons) and
// ContentPart, which it reads as vLLM does.
//
// # Server-Sent Events
//
// A stream is `data: <json>\n\n` events ending with `data: [DONE]\n\n`
// (AppendEvent, Done), as OpenAI sends it; EventReader reads one, as
// model servers send it.
//
// The package is internal: it defines the protocol for Tollgate's own
// parts, and promises nothing to other modules (which have OpenAI's SDKs).
// It imports nothing of Tollgate's (imports_test.go checks it), so that
// the edge, the engines and the central plane can all use it.
package openai
