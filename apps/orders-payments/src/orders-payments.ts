import { Queen, Stream, type RunHandle } from 'queen-mq';

/** A queue as a chain names it: `queen.queue('orders')` or `{ name: 'orders' }`. */
type QueueRef = Parameters<typeof Stream.from>[0];

/** An order as pushed to `orders`. */
export interface Order {
  orderId: string;
  amount: number;
  /** When the order was placed (ISO string or epoch ms): the order's event time. */
  placedAt: string | number;
}

/** A payment as pushed to `payments` (same partition as its order). */
export interface Payment {
  paymentId: string;
  orderId: string;
  /** When it was paid: the payment's event time. */
  paidAt: string | number;
}

/** What the output queue holds: one message per order paid within the bound, and one per order left unpaid. */
export interface OrderPayment {
  orderId: string;
  amount: number;
  paid: boolean;
  paymentId: string | null;
  paidAt: string | number | null;
}

/**
 * The chain before `.run()`: orders joined with their payments when paid
 * within `withinMinutes` (before or after the order), in event time. A left
 * join: an order that no payment matched is emitted with `paid: false` once
 * the payments queue's time has passed its bound; a payment outside every
 * order's bound pairs with nothing and is dropped.
 */
export function ordersWithPayments(orders: QueueRef, payments: QueueRef, sink: QueueRef, options: { withinMinutes?: number } = {}) {
  return Stream.from<Order>(orders)
    .join<Payment, OrderPayment>(payments, {
      within: { minutes: options.withinMinutes ?? 5 },
      key: { left: (o) => o.orderId, right: (p) => p.orderId },
      eventTime: { left: (o) => o.placedAt, right: (p) => p.paidAt },
      type: 'left',
      select: (o, p) => ({ orderId: o.orderId, amount: o.amount, paid: p !== null, paymentId: p?.paymentId ?? null, paidAt: p?.paidAt ?? null }),
    })
    .to(sink);
}

/** Options of {@link runOrdersPayments}. */
export interface OrdersPaymentsOptions {
  /** Broker URL. */
  url: string;
  /** Queues and query name. Defaults `orders`, `payments`, `orders.payments`, `orders.payments`. */
  orders?: string;
  payments?: string;
  sink?: string;
  queryId?: string;
  withinMinutes?: number;
  onError?: (error: Error) => void;
}

/** The example as a worker: `ordersWithPayments` run against a broker. */
export async function runOrdersPayments(options: OrdersPaymentsOptions): Promise<{ handle: RunHandle; queen: Queen }> {
  const { url } = options;
  const queen = new Queen({ url });
  const chain = ordersWithPayments(queen.queue(options.orders ?? 'orders'), queen.queue(options.payments ?? 'payments'), queen.queue(options.sink ?? 'orders.payments'), options);
  const handle = await chain.run({ queryId: options.queryId ?? 'orders.payments', url, batchSize: 100, onError: options.onError });
  return { handle, queen };
}
