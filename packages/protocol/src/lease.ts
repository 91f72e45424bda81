import { z } from 'zod';
import { uuid } from './values.js';

export const leaseExtendParams = z.object({ leaseId: uuid });
export const leaseExtendBody = z.object({ seconds: z.number().int().min(1).max(86400).default(60) });
export const leaseExtendResponse = z.array(
  z.object({
    index: z.number().int(),
    leaseId: z.string(),
    success: z.boolean(),
    error: z.string().nullable(),
    code: z.string().nullable(),
    expiresAt: z.string().nullable(),
  }),
);
export type LeaseExtendResult = z.infer<typeof leaseExtendResponse>[number];
