// Prompt codecs of imported models: the chat template decides the prompt tokens and the end of a response.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { chatTemplateCodec, promptCodec } from '../../compute/index.ts'
import { trainByteLevelBpe } from '../../policy/bpe-trainer.ts'
import { ChatTemplate } from '../../policy/chat-template.ts'
import { importHuggingFaceFolder } from '../../policy/hf-import.ts'
import { TextTokenizer } from '../../policy/tokenizer.ts'
import { QWEN2_FIXTURE } from './micro.ts'

const LLAMA3 =
  "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{% endfor %}" +
  '{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}'
const PLAIN =
  "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"

describe('chat template codec', () => {
  it("renders the Qwen2 fixture's ChatML template: the same tokens as the ChatML codec, responses end with <|im_end|>", async () => {
    const { tokenizer, chatTemplate } = await importHuggingFaceFolder(QWEN2_FIXTURE)
    assert.ok(chatTemplate)
    const codec = chatTemplateCodec(tokenizer, chatTemplate)
    const text = 'Sokoban. Push the box X onto the target O.\nNow it is your turn.'
    assert.deepEqual(codec.promptIds(text), promptCodec(tokenizer, 'chatml').promptIds(text))
    assert.equal(codec.countPromptTokens(text), codec.promptIds(text).length)
    const imEnd = tokenizer.tokenId('<|im_end|>')
    assert.equal(codec.responseIds('<action>up</action>').at(-1), imEnd)
    assert.ok(codec.eosIds.includes(imEnd as number))
    assert.equal(codec.decode(codec.responseIds('<action>up</action>')), '<action>up</action>')
  })

  it("finds another template's end-of-turn token (<|eot_id|>), and falls back to eos when a turn ends in plain text", () => {
    const specials = ['<|end_of_text|>', '<|begin_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>']
    const json = trainByteLevelBpe(['user: hello there', 'assistant: <action>up</action>'], {
      vocabSize: 300,
      specialTokens: specials,
    })
    const tokenizer = new TextTokenizer(json, {}, [0])
    const llama = chatTemplateCodec(tokenizer, new ChatTemplate(LLAMA3, { bosToken: '<|begin_of_text|>' }))
    assert.deepEqual(llama.promptIds('hi'), [
      1,
      2,
      ...tokenizer.encode('user'),
      3,
      ...tokenizer.encode('\n\nhi'),
      4,
      2,
      ...tokenizer.encode('assistant'),
      3,
      ...tokenizer.encode('\n\n'),
    ])
    assert.equal(llama.responseIds('up').at(-1), 4)
    assert.deepEqual([...llama.eosIds].sort(), [0, 4])
    const plain = chatTemplateCodec(tokenizer, new ChatTemplate(PLAIN))
    assert.equal(plain.responseIds('up').at(-1), 0)
    assert.deepEqual(plain.eosIds, [0])
  })
})
