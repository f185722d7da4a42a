// Two turns of one conversation, store: true (the SDK's default): the second sends the first's items back as
// item_reference items. Streamed, as chat UIs use it.
import { generateText, streamText } from 'ai';
import { openai, summary } from './common.mjs';

const model = openai(process.argv[3] ?? 'scripted');
const messages = [{ role: 'user', content: 'My name is Ada.' }];
const first = await generateText({ model, messages });
messages.push(...first.response.messages, { role: 'user', content: 'What is my name?' });
const second = streamText({ model, messages });
await second.consumeStream();
console.log(JSON.stringify({ first: summary(first), second: { text: await second.text } }));
