import { z } from 'zod';

export const healthResponse = z.object({
  status: z.literal('healthy'),
  database: z.enum(['connected', 'disconnected']),
  version: z.string(),
  uptimeSeconds: z.number(),
});

export const readyResponse = z.object({
  ready: z.boolean(),
  database: z.enum(['connected', 'disconnected']),
  schemaVersion: z.number().int().nullable(),
  expectedSchemaVersion: z.number().int(),
});
