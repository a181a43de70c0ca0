#include "server/model_text.h"

#include <algorithm>

#include "server/api_error.h"

namespace tandem::server {
namespace {

using Json = nlohmann::ordered_json;

// Templates of reasoning models may open the <think> block in the generation prompt themselves.
bool opensThinking(const std::string& prompt) {
    const auto end = prompt.find_last_not_of(" \n");
    return std::string_view(prompt).substr(0, end == std::string::npos ? 0 : end + 1).ends_with("<think>");
}

void append(std::vector<Delta>& out, Delta::Kind kind, std::string text) {
    if (text.empty()) return;
    if (!out.empty() && out.back().kind == kind && kind != Delta::Kind::ToolCall)
        out.back().text += text;
    else
        out.push_back({kind, std::move(text), {}});
}

}  // namespace

ModelText::ModelText(const std::filesystem::path& modelDir, const std::string& modelType)
    : tokenizer_(text::Tokenizer::load(modelDir)), template_(ModelChatTemplate::load(modelDir, modelType)) {
    // The template's end-of-turn token ends an answer, whatever generation_config.json lists.
    if (const auto eos = template_.specialToken("eos_token"))
        if (const auto id = tokenizer_.tokenToId(*eos)) endOfTurn_.push_back(*id);
    // gpt-oss ends its turn with <|return|> (an answer) or <|call|> (a tool call).
    for (const int id : text::harmonyEndOfTurnTokens(tokenizer_))
        if (std::find(endOfTurn_.begin(), endOfTurn_.end(), id) == endOfTurn_.end()) endOfTurn_.push_back(id);
    // The model writes calls as its template renders past ones (arguments as an object for some
    // templates, as JSON text for others).
    std::string rendered;
    for (const Json& args : {Json{{"x", 1}}, Json("{\"x\": 1}")}) {
        try {
            const Json call{{"id", "call_0"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", args}}}};
            const Json messages = Json::array({{{"role", "user"}, {"content", "?"}},
                                               {{"role", "assistant"}, {"content", ""}, {"tool_calls", Json::array({call})}}});
            rendered = template_.render(messages, false, Json::object());
            if (server::toolCallFormat(rendered, "") != ToolCallFormat::None) break;
        } catch (const std::exception&) {
        }
    }
    toolCallFormat_ = server::toolCallFormat(rendered, modelType);
}

Prompt ModelText::chatPrompt(const ChatRequest& request) const {
    Json variables = request.templateVariables;
    // As Chat::reply renders it, so a conversation makes the same prompt here as in tandem-cli chat.
    if (!variables.contains("enable_thinking")) variables["enable_thinking"] = true;
    // As the template reads them (gpt-oss: reasoning_content as thinking, arguments as objects).
    const Json messages = messagesForTemplate(toolCallFormat_, request.messages);
    std::string text;
    try {
        text = template_.render(messages, true, variables);
        if (!request.tools.is_null()) {
            Json withTools = variables;
            withTools["tools"] = request.tools;
            std::string rendered = template_.render(messages, true, withTools);
            // A template that never reads `tools` renders the same with them: the model would not see them.
            if (rendered == text)
                throw ApiError(400, "this model's chat template does not take tools, so the model cannot be offered any: "
                                    "leave tools out (or set tool_choice to \"none\")",
                               "tools", "tools_not_supported");
            text = std::move(rendered);
        }
    } catch (const tandem::Error& e) {
        throw ApiError(400, std::string("the model's chat template refused this conversation: ") + e.what(), "messages",
                       "template_error");
    }
    Prompt prompt{tokenizer_.encode(text, false), opensThinking(text)};
    if (prompt.tokens.empty()) throw ApiError(400, "the conversation makes an empty prompt", "messages");
    return prompt;
}

Prompt ModelText::completionPrompt(const CompletionRequest& request) const {
    Prompt prompt;
    if (!request.promptIds.empty()) {
        for (const int id : request.promptIds)
            if (id >= tokenizer_.vocabSize())
                throw ApiError(400, "prompt: token id " + std::to_string(id) + " is outside the vocabulary (" +
                                        std::to_string(tokenizer_.vocabSize()) + " tokens)",
                               "prompt");
        prompt.tokens = request.promptIds;
    } else {
        // Like a text given to transformers' tokenizer: with what the model expects around it (e.g. BOS).
        prompt.tokens = tokenizer_.encode(request.prompt, true);
    }
    if (prompt.tokens.empty()) throw ApiError(400, "the prompt is empty", "prompt");
    return prompt;
}

GenerateOptions ModelText::chatOptions(GenerateOptions options) const {
    options.stopTokenIds.insert(options.stopTokenIds.end(), endOfTurn_.begin(), endOfTurn_.end());
    return completionOptions(std::move(options));
}

GenerateOptions ModelText::completionOptions(GenerateOptions options) const {
    options.vocabularyLimit = tokenizer_.vocabSize();
    return options;
}

namespace {

// The ids of the format's tags that the tokenizer holds as special tokens: shown, so the parser sees them.
std::vector<int> shownMarkers(const text::Tokenizer& tokenizer, ToolCallFormat format) {
    std::vector<int> ids;
    for (const std::string_view marker : toolCallMarkers(format))
        if (const auto id = tokenizer.tokenToId(std::string(marker)); id && tokenizer.isSpecial(*id)) ids.push_back(*id);
    return ids;
}

}  // namespace

TextStream::TextStream(const text::Tokenizer& tokenizer, bool startsInReasoning, bool separateReasoning,
                       std::vector<std::string> stops, ToolCallFormat toolCalls)
    // A completion's text is the model's as it is: harmony's channels are not read either.
    : decoder_(tokenizer, {startsInReasoning, shownMarkers(tokenizer, toolCalls), separateReasoning}),
      stops_(std::move(stops)),
      toolCalls_(toolCalls),
      separateReasoning_(separateReasoning),
      inReasoning_(startsInReasoning) {}

void TextStream::push(int id, std::vector<Delta>& out) { route(decoder_.push(id), out); }

void TextStream::finish(std::vector<Delta>& out) {
    route(decoder_.finish(), out);
    std::string text;
    std::vector<ToolCall> calls;
    toolCalls_.push(stops_.finish(), text, calls);
    toolCalls_.finish(text, calls);
    parsed(std::move(text), calls, out);
}

void TextStream::route(const std::vector<text::StreamText>& pieces, std::vector<Delta>& out) {
    for (const auto& piece : pieces) {
        if (stops_.stopped()) return;
        const bool reasoning = piece.kind == text::StreamText::Kind::Reasoning;
        if (separateReasoning_ && reasoning) {
            append(out, Delta::Kind::Reasoning, piece.text);
            continue;
        }
        // A completion is the model's text as it is: the decoder's think tags are put back.
        if (!separateReasoning_ && reasoning != inReasoning_) content(reasoning ? "<think>" : "</think>", out);
        inReasoning_ = reasoning;
        content(piece.text, out);
    }
}

void TextStream::content(std::string text, std::vector<Delta>& out) {
    std::string shown;
    std::vector<ToolCall> calls;
    toolCalls_.push(stops_.push(text), shown, calls);
    parsed(std::move(shown), calls, out);
}

// OpenAI's message has content and calls apart: a piece's content goes before the calls it closed.
void TextStream::parsed(std::string text, std::vector<ToolCall>& calls, std::vector<Delta>& out) {
    append(out, Delta::Kind::Content, std::move(text));
    for (auto& call : calls) out.push_back({Delta::Kind::ToolCall, std::move(call.name), std::move(call.arguments)});
}

}  // namespace tandem::server
