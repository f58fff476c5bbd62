// Package server answers HTTP for an open anna directory: a thin layer of
// net/http handlers over an *engine.Engine, mounted by `annactl serve` or
// on a program's own mux (New returns an http.Handler).
//
//	eng, _ := engine.Open(ctx, "my-index", engine.Options{})
//	srv, _ := server.New(eng, server.Options{})
//	defer srv.Close() // before eng.Close
//	http.Handle("/", srv)
//
// # Routes
//
//	POST   /v1/search           query, k, mode, fusion, weights, filter (the JSON filter language), snippets, explain, rerank → hits
//	POST   /v1/documents        {"documents": [...]} or JSON lines: add or update, the fields of annactl index's input
//	GET    /v1/documents/{id}   one stored document
//	DELETE /v1/documents/{id}   remove one
//	GET    /v1/stats            counts, model, fusion
//	GET    /v1/metadata         the documents' metadata keys: values, the most common ones, number ranges (?top=N)
//	POST   /v1/embeddings       OpenAI's embeddings API (input, model, encoding_format float|base64, dimensions)
//	GET    /v1/models           OpenAI's model list: the model served (and the reranker)
//	GET    /v1/models/{id}      OpenAI's model object
//	POST   /v1/rerank           Cohere v1's and Jina's rerank API (query, documents, top_n → results[].index, relevance_score)
//	POST   /v1/embed            Cohere v1's embed API (texts, input_type, embedding_types float)
//	POST   /v2/embed            Cohere v2's embed API
//	POST   /v2/rerank           Cohere v2's rerank API
//	POST   /embed               text-embeddings-inference's embed API (inputs, prompt_name → [[...]])
//	POST   /rerank              text-embeddings-inference's rerank API (query, texts → [{index, score}])
//	GET    /info                text-embeddings-inference's model description
//	POST   /                    text-embeddings-inference's root route (what huggingface_hub's InferenceClient posts to)
//	POST   /api/embed           Ollama's embed API (model, input → embeddings)
//	POST   /api/embeddings      Ollama's older embeddings API (model, prompt → embedding)
//	GET    /api/tags            Ollama's model list
//	GET    /mcp, POST, DELETE   the Model Context Protocol (streamable HTTP): tools search, get, multi_get, status (add, delete with Options.MCPWrites)
//	GET    /healthz             200 "ok" while serving
//	GET    /metrics             Prometheus text: requests, latencies, batch sizes, documents
//	GET    /openapi.json        an OpenAPI 3.1 description of every route
//	GET    /                    a search page (files embedded in the binary)
//
// # Invariants
//
//   - The dialects of other APIs answer with the one model and reranker
//     served whatever model a request names (each new name is logged once
//     through Options.Logf), unless Options.StrictModel; they ignore
//     request fields they do not know, as their servers do. Token IDs are
//     refused (the server tokenizes text with its own model), naming
//     langchain-openai's fix.
//   - Errors are JSON, {"error": {"code", "message", "type"}} (the shape
//     OpenAI's clients read; Ollama's and text-embeddings-inference's
//     routes answer {"error": MESSAGE, "error_type": CODE}, theirs): code
//     is a stable word (invalid_request, limit_exceeded, too_large,
//     unauthorized, forbidden, read_only, not_found, method_not_allowed,
//     model_not_found, unsupported, timeout, unavailable, internal),
//     message the engine's own error text, the same the command line
//     prints, at most 2 KiB: input is quoted by its start (a client's
//     mistake is a 4xx, never a 500). An error that carries a hint
//     (package hint: a missing model, a stale index, a limit) adds
//     "hint": [{"kind", "index", "model", "option", "value", "text"}], what
//     the user can do, text rendered by Options.HintText.
//   - No web page can use the server (desktop.go, in front of every
//     route): Host must be a loopback name, an IP address or one of
//     Options.AllowedHosts (DNS rebinding); a request that may write from
//     a page of another origin is refused unless Options.CORS lists it
//     (CORS headers go to those origins only); a body is read only with a
//     JSON Content-Type; it must arrive within the timeout (also before a
//     401); every answer says X-Content-Type-Options: nosniff.
//   - A write is acknowledged (200) only after Engine.Add or Delete has
//     returned nil: its bbolt transaction has committed, so a process
//     killed after the answer loses nothing the client was told is stored.
//   - Every request runs under its own context, cancelled when the client
//     goes away or Options.Timeout passes; the engine's calls take it.
//   - Limits (Options.Limits) are checked before the engine is called:
//     body size (413), documents per batch, inputs per embedding request,
//     k, query length, bytes per text, model tokens per request (400,
//     code limit_exceeded, naming the field); the tokens are counted
//     before any model work, under the request's deadline (budget.go).
//   - No request names a file: document IDs are keys of the store, models
//     are the engine's own; nothing from a request becomes a path.
//   - With Options.APIKey set, every route but GET /healthz, GET / and
//     GET /openapi.json wants "Authorization: Bearer KEY" (or "X-API-Key:
//     KEY"), compared in constant time.
//   - Concurrent embedding requests (every dialect) are coalesced into one
//     EmbedDocuments call (one ONNX Runtime batch set) by a batcher: it
//     waits at most Options.BatchWait after the first request for others,
//     and takes at most Options.BatchTexts texts and BatchTokens tokens.
//     Concurrent /v1/rerank requests, whatever their queries, are
//     coalesced the same way (same wait and bounds, in pairs and pair
//     tokens) into one rerank.ScorePairs call: one model call set for a
//     rerank.PairScorer (rerank.Model), else one Score call per
//     distinct query. Each request gets its own documents' scores, in
//     order.
//   - The Server holds no global state: its metrics are in a registry of
//     its own.
package server
