// A tool loop: the model calls get_weather, the SDK runs it and sends the result (the call as an
// item_reference), the model answers. argv[3]: the model, argv[4]: the question.
import { generateText, stepCountIs } from 'ai';
import { getWeather, openai, summary } from './common.mjs';

const result = await generateText({
  model: openai(process.argv[3]),
  tools: { get_weather: getWeather },
  stopWhen: stepCountIs(4),
  prompt: process.argv[4],
  providerOptions: { openai: { reasoningSummary: 'auto' } },  // what apps set to show a reasoning model's thinking
});
console.log(JSON.stringify(summary(result)));
