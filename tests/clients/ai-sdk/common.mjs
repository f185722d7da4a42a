// Shared by the scenario scripts: the provider pointed at rostra (argv[2]: its /v1 URL), and the printer.
import { createOpenAI } from '@ai-sdk/openai';
import { tool } from 'ai';
import { z } from 'zod';

export const openai = createOpenAI({ baseURL: process.argv[2], apiKey: 'unused' });

export const getWeather = tool({
  description: 'The weather in a city.',
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => (city === 'Paris' ? 'rainy in Paris' : `sunny in ${city}`),
});

// What a test checks: the steps' text, reasoning, calls and results, as JSON on stdout.
export function summary(result) {
  return {
    text: result.text,
    steps: result.steps.map((step) => ({
      text: step.text,
      reasoning: step.reasoningText ?? null,
      calls: step.toolCalls.map((call) => [call.toolName, call.input]),
      results: step.toolResults.map((r) => r.output),
      finishReason: step.finishReason,
    })),
  };
}
